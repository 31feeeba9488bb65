package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFGroupAdd;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * The form virtual rules and groups are saved in ({@link Persistence}): the FLOW_ADD / GROUP_ADD
 * that recreates each. Used by one thread at a time (the journal writer). A rule's hex encoding is
 * kept while the rule object is unchanged, so a save of thousands of rules encodes only the ones
 * changed since the last save.
 */
final class SavedForm {
  private final OFFactory factory;
  private final Map<VirtualRule.Key, Map.Entry<VirtualRule, String>> cache = new HashMap<>();

  SavedForm(OFFactory factory) {
    this.factory = factory;
  }

  /** The hex-encoded FLOW_ADD of every rule of {@code rules}, in their order. */
  List<String> flows(List<VirtualRule> rules) {
    Set<VirtualRule.Key> keys = new HashSet<>(rules.size() * 2);
    rules.forEach(r -> keys.add(r.key()));
    cache.keySet().retainAll(keys);
    List<String> hex = new ArrayList<>(rules.size());
    for (VirtualRule r : rules) {
      hex.add(flow(r));
    }
    return hex;
  }

  /** The hex-encoded FLOW_ADD of {@code r} (cached while {@code r} is the rule under its key). */
  String flow(VirtualRule r) {
    Map.Entry<VirtualRule, String> c = cache.get(r.key());
    if (c != null && c.getKey() == r) {
      return c.getValue();
    }
    String h = Persistence.hex(flowAdd(r));
    cache.put(r.key(), Map.entry(r, h));
    return h;
  }

  /** The GROUP_ADD of {@code g}. */
  OFMessage group(VirtualGroup g) {
    return factory
        .buildGroupAdd()
        .setGroup(OFGroup.of(g.groupId()))
        .setGroupType(g.type())
        .setBuckets(g.buckets())
        .build();
  }

  private OFMessage flowAdd(VirtualRule r) {
    return factory
        .buildFlowAdd()
        .setTableId(TableId.of(r.table()))
        .setPriority(r.priority())
        .setMatch(r.match())
        .setInstructions(r.instructions())
        .setCookie(U64.of(r.cookie()))
        .setIdleTimeout(r.idleTimeout())
        .setHardTimeout(r.hardTimeout())
        .setFlags(r.flags())
        .setBufferId(OFBufferId.NO_BUFFER)
        .build();
  }

  /** The GROUP_ADD of every group of {@code groups}, in their order. */
  List<OFMessage> groups(Collection<VirtualGroup> groups) {
    List<OFMessage> out = new ArrayList<>(groups.size());
    for (VirtualGroup g : groups) {
      out.add(group(g));
    }
    return out;
  }

  /** The rule a saved FLOW_ADD recreates, installed at {@code nowMs} (timeouts restart). */
  static VirtualRule rule(OFFlowAdd f, long nowMs) {
    return VirtualRule.of(f, f.getTableId().getValue(), nowMs);
  }

  /** The group a saved GROUP_ADD recreates. */
  static VirtualGroup group(OFGroupAdd g) {
    return new VirtualGroup(g.getGroup().getGroupNumber(), g.getGroupType(), g.getBuckets());
  }
}
