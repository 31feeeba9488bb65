package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.ActionSetOrder;
import net.uno.oneswitch.translate.GroupLabels;
import net.uno.oneswitch.translate.MatchUtil;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.Translator;
import net.uno.oneswitch.translate.VlanPushOrder;
import net.uno.oneswitch.translate.WriteActionSet;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupModCommand;
import org.projectfloodlight.openflow.protocol.OFGroupModFailedCode;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.TableId;

/**
 * The virtual OpenFlow 1.3 switch the controllers program, as a pure model: its flow tables, its
 * groups and its port map, and two per-table facts translation depends on (what the rules write
 * into the action set, {@link ActionSetOrder}; how many VLAN headers a frame may carry into each
 * table, {@link VlanPushOrder}).
 *
 * <p>A FLOW_MOD or GROUP_MOD is validated here and returned as the change it would make ({@link
 * RuleEdit}, {@link GroupEdit}) without being applied: the caller translates the change and commits
 * it only if every physical form exists, so a refused message leaves the model as it was. Deletions
 * cannot be refused and are committed at once ({@link Removal}). No translation and no I/O here.
 * Core thread only.
 */
public final class VirtualSwitch {
  private final int nTables;
  private final LinkedHashMap<VirtualRule.Key, VirtualRule> rules = new LinkedHashMap<>();
  private final Map<VirtualRule.Key, VirtualRule> rulesView = Collections.unmodifiableMap(rules);
  private final TreeMap<Integer, VirtualGroup> groups = new TreeMap<>();
  private final Map<Integer, VirtualGroup> groupsView = Collections.unmodifiableMap(groups);
  private final Map<Integer, Long> groupCreated = new HashMap<>();
  private final ActionSetOrder setOrder = new ActionSetOrder();
  private final VlanPushOrder pushOrder;
  private PortMap ports = PortMap.empty();
  private final LinkedHashMap<VirtualRule.Key, VirtualRule> changedRules = new LinkedHashMap<>();
  private final java.util.LinkedHashSet<Integer> changedGroups = new java.util.LinkedHashSet<>();
  private boolean portsChanged;

  /**
   * A change of rules, not applied yet: {@code added} replace the rules of {@code removed} with the
   * same key (if any); {@code newEntries}: an ADD (the entries start afresh: counters, idle time);
   * {@code resetCounters}: the physical replicas must restart their counters. {@code before} and
   * {@code after} are the VLAN depths of the tables without and with the change, and {@code
   * relying} the other rules whose translation depends on a depth that differs between them.
   */
  public record RuleEdit(
      List<VirtualRule> removed,
      List<VirtualRule> added,
      boolean newEntries,
      boolean resetCounters,
      VlanPushOrder.Depths before,
      VlanPushOrder.Depths after,
      List<VirtualRule> relying) {
    /** The rule of {@code removed} with key {@code k}, or null. */
    public VirtualRule replaced(VirtualRule.Key k) {
      for (VirtualRule r : removed) {
        if (r.key().equals(k)) {
          return r;
        }
      }
      return null;
    }
  }

  /**
   * Rules removed (applied): {@code relying} are the remaining rules whose translation depends on a
   * VLAN depth that changed with the removal (it can only have dropped).
   */
  public record Removal(List<VirtualRule> removed, List<VirtualRule> relying) {}

  /**
   * A GROUP_MOD, not applied yet: put {@code group} (replacing {@code old}, null if it is new), or
   * (group null) delete the groups {@code deleted} and the rules using them.
   */
  public record GroupEdit(VirtualGroup group, VirtualGroup old, List<Integer> deleted) {}

  /** {@code tables} virtual tables; frames come in with at most {@code wireVlans} VLAN headers. */
  /** See {@link #changes()}. */
  private long changes;

  public VirtualSwitch(int tables, int wireVlans) {
    this.nTables = tables;
    this.pushOrder = new VlanPushOrder(wireVlans);
  }

  public int tables() {
    return nTables;
  }

  /** The rules in installation order (read-only). */
  public Map<VirtualRule.Key, VirtualRule> rules() {
    return rulesView;
  }

  public VirtualRule rule(VirtualRule.Key k) {
    return rules.get(k);
  }

  /** The controller's groups by id (read-only). */
  public Map<Integer, VirtualGroup> groups() {
    return groupsView;
  }

  public VirtualGroup group(int id) {
    return groups.get(id);
  }

  /** The clock time group {@code id} was added at, or {@code dflt} if unknown. */
  public long groupCreated(int id, long dflt) {
    return groupCreated.getOrDefault(id, dflt);
  }

  public PortMap ports() {
    return ports;
  }

  /**
   * How many changes the rules, groups and port map have had (a version: equal values, the same
   * virtual state).
   */
  public long changes() {
    return changes;
  }

  public void setPorts(PortMap pm) {
    ports = pm;
    changes++;
    portsChanged = true;
  }

  /**
   * What changed since the last call (rules by key with the rule last seen under it, groups by id,
   * whether the port map did), for the journal ({@link StateStore}); each is then forgotten.
   */
  public Changes drainChanges() {
    Changes c =
        new Changes(
            new LinkedHashMap<>(changedRules), changedGroups.stream().toList(), portsChanged);
    changedRules.clear();
    changedGroups.clear();
    portsChanged = false;
    return c;
  }

  /**
   * Changes since the last drain: {@code rules} maps a changed key to the rule last seen under it
   * (present now, or the one removed); {@code groups} lists changed group ids.
   */
  public record Changes(
      Map<VirtualRule.Key, VirtualRule> rules, List<Integer> groups, boolean ports) {
    public boolean isEmpty() {
      return rules.isEmpty() && groups.isEmpty() && !ports;
    }
  }

  /** How many VLAN headers a frame may carry into each table now. */
  public VlanPushOrder.Depths depths() {
    return pushOrder.depths();
  }

  // ------------------------------------------------------------------ flow-mods

  private int table(OFFlowMod fm, boolean allOk) throws OfError {
    int t = fm.getTableId().getValue();
    if (allOk && fm.getTableId().equals(TableId.ALL)) {
      return -1;
    }
    if (t >= nTables) {
      throw new OfError(OFFlowModFailedCode.BAD_TABLE_ID, "table " + t);
    }
    return t;
  }

  /** An ADD, installed at {@code nowMs}. */
  public RuleEdit add(OFFlowMod fm, long nowMs) throws OfError {
    int table = table(fm, false);
    if (!fm.getBufferId().equals(OFBufferId.NO_BUFFER)) {
      throw new OfError(OFBadRequestCode.BUFFER_UNKNOWN, "OneSwitch buffers no packets");
    }
    VirtualRule r = VirtualRule.of(fm, table, nowMs);
    return add(r, fm.getFlags().contains(OFFlowModFlags.CHECK_OVERLAP));
  }

  /** Adding rule {@code r} (an ADD, a restored rule): replaces an identical entry. */
  public RuleEdit add(VirtualRule r, boolean checkOverlap) throws OfError {
    VirtualRule.Key key = r.key();
    if (checkOverlap) {
      for (VirtualRule o : rules.values()) {
        if (o.table() == r.table()
            && o.priority() == r.priority()
            && !o.key().equals(key)
            && MatchUtil.overlaps(o.match(), r.match())) {
          throw new OfError(OFFlowModFailedCode.OVERLAP, "overlaps an existing entry");
        }
      }
    }
    setOrder.check(r);
    VirtualRule prev = rules.get(key);
    return edit(prev == null ? List.of() : List.of(prev), List.of(r), true, prev != null);
  }

  /** A MODIFY or MODIFY_STRICT: the selected rules take the new instructions. */
  public RuleEdit modify(OFFlowMod fm, boolean strict) throws OfError {
    int table = table(fm, false);
    List<VirtualRule> sel = RuleSelect.forFlowMod(rules.values(), fm, table, strict, false);
    List<VirtualRule> updated = new ArrayList<>();
    for (VirtualRule r : sel) {
      VirtualRule n = r.withInstructions(fm.getInstructions());
      setOrder.check(n);
      updated.add(n);
    }
    return edit(sel, updated, false, fm.getFlags().contains(OFFlowModFlags.RESET_COUNTS));
  }

  /**
   * Putting {@code old} back in place of whatever rule holds its key (a rollback): checked again,
   * since a rule added since may conflict with it.
   */
  public RuleEdit restore(VirtualRule old) throws OfError {
    setOrder.check(old);
    VirtualRule cur = rules.get(old.key());
    return edit(cur == null ? List.of() : List.of(cur), List.of(old), false, false);
  }

  /** The rules a DELETE or DELETE_STRICT selects. */
  public List<VirtualRule> selectDelete(OFFlowMod fm, boolean strict) throws OfError {
    int table = table(fm, true);
    return RuleSelect.forFlowMod(rules.values(), fm, table, strict, true);
  }

  /** The rules whose actions use one of the groups {@code ids}. */
  public List<VirtualRule> usingGroups(Collection<Integer> ids) {
    List<VirtualRule> out = new ArrayList<>();
    for (VirtualRule r : rules.values()) {
      if (RuleSelect.usesGroup(r, ids::contains)) {
        out.add(r);
      }
    }
    return out;
  }

  /** The rules whose actions use group {@code id}. */
  public List<VirtualRule> usingGroup(int id) {
    return RuleSelect.usingGroup(rules.values(), id);
  }

  private RuleEdit edit(
      List<VirtualRule> removed, List<VirtualRule> added, boolean newEntries, boolean reset) {
    VlanPushOrder.Depths before = pushOrder.depths();
    VlanPushOrder.Depths after = pushOrder.depthsWith(removed, added);
    List<VirtualRule> relying = new ArrayList<>();
    if (!before.equals(after)) {
      java.util.Set<VirtualRule.Key> keys = new java.util.HashSet<>();
      added.forEach(r -> keys.add(r.key()));
      for (VirtualRule r : relyingWhereChanged(before, after)) {
        if (!keys.contains(r.key())) {
          relying.add(r);
        }
      }
    }
    return new RuleEdit(removed, added, newEntries, reset, before, after, relying);
  }

  /** Applies an edit (its translation was accepted). */
  public void commit(RuleEdit e) {
    for (VirtualRule r : e.added()) {
      if (e.newEntries()) {
        removeRule(r.key()); // an ADD's entry is new: it goes last in the installation order
      }
      putRule(r);
    }
  }

  /** Removes the rules with keys {@code keys} (those present). */
  public Removal remove(Collection<VirtualRule.Key> keys) {
    VlanPushOrder.Depths before = pushOrder.depths();
    List<VirtualRule> removed = new ArrayList<>();
    for (VirtualRule.Key k : keys) {
      VirtualRule r = removeRule(k);
      if (r != null) {
        removed.add(r);
      }
    }
    return new Removal(removed, relyingWhereChanged(before, pushOrder.depths()));
  }

  /**
   * Every change of {@code rules} goes through here and {@link #removeRule} (the orders' counts).
   */
  private void putRule(VirtualRule r) {
    changes++;
    VirtualRule old = rules.put(r.key(), r);
    changedRules.put(r.key(), r);
    setOrder.remove(old);
    setOrder.add(r);
    pushOrder.remove(old);
    pushOrder.add(r);
  }

  private VirtualRule removeRule(VirtualRule.Key k) {
    changes++;
    VirtualRule old = rules.remove(k);
    if (old != null) {
      changedRules.put(k, old);
    }
    setOrder.remove(old);
    pushOrder.remove(old);
    return old;
  }

  /**
   * The rules relying on the frame depth in the tables whose depth differs between two snapshots.
   */
  private List<VirtualRule> relyingWhereChanged(VlanPushOrder.Depths a, VlanPushOrder.Depths b) {
    if (a.equals(b)) {
      return List.of();
    }
    List<VirtualRule> out = new ArrayList<>();
    for (VirtualRule r : rules.values()) {
      int t = r.table();
      int next = VlanPushOrder.setGoesOn(r);
      VlanPushOrder.Depths ar = a.of(r);
      VlanPushOrder.Depths br = b.of(r);
      if ((ar.at(t) != br.at(t) && VlanPushOrder.reliesOnDepth(r))
          || (next >= 0 && ar.after(next) != br.after(next))) {
        out.add(r);
      }
    }
    return out;
  }

  // ------------------------------------------------------------------ groups

  /** A GROUP_MOD as the change it makes. */
  public GroupEdit groupMod(OFGroupMod gm) throws OfError {
    int id = gm.getGroup().getGroupNumber();
    boolean all = gm.getGroup().equals(OFGroup.ALL);
    if (!all && Integer.compareUnsigned(id, OFGroup.MAX.getGroupNumber()) > 0) {
      throw new OfError(OFGroupModFailedCode.INVALID_GROUP, "group " + gm.getGroup());
    }
    if (Translator.isScaleGroup(id)
        || WriteActionSet.isCarrierGroup(id)
        || GroupLabels.isVariant(id)) {
      throw new OfError(
          OFGroupModFailedCode.INVALID_GROUP,
          "group ids 0x"
              + Integer.toHexString(Translator.SCALE_GROUP_BASE)
              + "..+"
              + Translator.SCALE_GROUP_COUNT
              + " are reserved for OneSwitch");
    }
    switch (gm.getCommand()) {
      case ADD, MODIFY -> {
        if (all) {
          throw new OfError(OFGroupModFailedCode.INVALID_GROUP, "group ALL");
        }
        boolean exists = groups.containsKey(id);
        if (gm.getCommand() == OFGroupModCommand.ADD && exists) {
          throw new OfError(OFGroupModFailedCode.GROUP_EXISTS, "group " + id + " exists");
        }
        if (gm.getCommand() == OFGroupModCommand.MODIFY && !exists) {
          throw new OfError(OFGroupModFailedCode.UNKNOWN_GROUP, "group " + id + " unknown");
        }
        VirtualGroup g = new VirtualGroup(id, gm.getGroupType(), gm.getBuckets());
        if (g.type() == OFGroupType.INDIRECT && g.buckets().size() != 1) {
          throw new OfError(OFGroupModFailedCode.BAD_BUCKET, "indirect group needs one bucket");
        }
        return put(g);
      }
      case DELETE -> {
        return new GroupEdit(null, null, all ? new ArrayList<>(groups.keySet()) : List.of(id));
      }
      default -> throw new OfError(OFGroupModFailedCode.BAD_COMMAND, "" + gm.getCommand());
    }
  }

  /** Putting group {@code g} (a GROUP_MOD, a restored group, a rollback). */
  public GroupEdit put(VirtualGroup g) {
    return new GroupEdit(g, groups.get(g.groupId()), List.of());
  }

  /** Applies a put (its translation was accepted), added at {@code nowMs} if it is new. */
  public void commitGroup(VirtualGroup g, long nowMs) {
    changes++;
    if (groups.put(g.groupId(), g) == null) {
      groupCreated.put(g.groupId(), nowMs);
    }
    changedGroups.add(g.groupId());
  }

  /** Removes group {@code id}; false if there was none. */
  public boolean removeGroup(int id) {
    changes++;
    if (groups.remove(id) == null) {
      return false;
    }
    groupCreated.remove(id);
    changedGroups.add(id);
    return true;
  }
}
