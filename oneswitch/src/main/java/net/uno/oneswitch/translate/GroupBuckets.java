package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.function.LongFunction;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;
import org.projectfloodlight.openflow.protocol.OFGroupModFailedCode;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;

/**
 * Group buckets per physical switch (docs/translation.md, "Groups"): the controller's groups, whose
 * bucket outputs are translated per switch (a bucket is an action set, so a remote output is push
 * tag + set tag + output, with no pop), and OneSwitch's SELECT group of a scaled-out vport. Pure:
 * returns new buckets.
 */
final class GroupBuckets {
  private static final OFFactory F = MatchUtil.F;

  private final Translator t;

  /** {@code t}: the translator of the rules using the groups (port map, tags, outputs). */
  GroupBuckets(Translator t) {
    this.t = t;
  }

  /**
   * Buckets of OneSwitch's SELECT group of scaled-out {@code v} on switch {@code sw}: one bucket
   * per instance, of the instance's weight (OVS picks the highest {@code hash(bucket) * weight}, so
   * raising one weight only moves flows to that bucket), a local output or the instance's own
   * flow-id tag toward its switch (each instance has its tag, so the ingress switch alone chooses:
   * chained selects on several switches would hash the flow with the same function and skew). Empty
   * if a tag is not live (then no rule on {@code sw} uses the group).
   */
  static Optional<List<OFBucket>> scale(
      Topology topo, VPort v, String sw, LongFunction<OptionalInt> tagOf) {
    List<OFBucket> out = new ArrayList<>();
    for (int i = 0; i < v.k(); i++) {
      VPort.Loc l = v.instances().get(i);
      List<OFAction> acts;
      if (l.sw().equals(sw)) {
        acts = List.of(F.actions().output(OFPort.of(l.port()), 0xffff));
      } else {
        OptionalInt t = tagOf.apply(Translator.tagKey(v.vport(), i));
        if (t.isEmpty()) {
          return Optional.empty();
        }
        acts =
            List.of(
                F.actions().pushVlan(EthType.VLAN_FRAME),
                F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(t.getAsInt()))),
                F.actions().output(OFPort.of(topo.nextHopPort(sw, l.sw())), 0xffff));
      }
      out.add(
          F.buildBucket()
              .setWeight(v.weights().get(i))
              .setWatchPort(OFPort.ANY)
              .setWatchGroup(org.projectfloodlight.openflow.types.OFGroup.ANY)
              .setActions(acts)
              .build());
    }
    return Optional.of(out);
  }

  /** Buckets of virtual group {@code g} as installed on {@code sw}. */
  List<OFBucket> of(VirtualGroup g, String sw) throws OfError {
    if (g.type() == OFGroupType.FF) {
      throw new OfError(OFGroupModFailedCode.BAD_TYPE, "fast-failover groups are not supported");
    }
    List<OFBucket> out = new ArrayList<>();
    for (OFBucket b : g.buckets()) {
      List<OFAction> acts;
      try {
        acts = bucketActions(b.getActions(), sw);
      } catch (OfError e) {
        throw new OfError(OFGroupModFailedCode.BAD_BUCKET, e.getMessage());
      }
      out.add(
          F.buildBucket()
              .setWeight(b.getWeight())
              .setWatchPort(OFPort.ANY)
              .setWatchGroup(org.projectfloodlight.openflow.types.OFGroup.ANY)
              .setActions(acts)
              .build());
    }
    return out;
  }

  /**
   * Translates a bucket's actions. OVS executes a bucket as an action SET (ovs-actions(7), "The
   * group action"): pops run before pushes, set_fields before the one output, duplicates collapse.
   * So a remote output becomes push tag + set tag + output with no trailing pop (each bucket works
   * on its own copy of the packet), and anything whose meaning the tag would change is refused: the
   * controller's own VLAN push/set in a bucket that crosses PCIe (one push_vlan and one vlan_vid
   * slot in the set), more than one output, FLOOD/ALL.
   */
  List<OFAction> bucketActions(List<OFAction> in, String sw) throws OfError {
    List<OFAction> out = new ArrayList<>();
    boolean remote = false;
    boolean vlanOwn = false;
    int outputs = 0;
    for (OFAction a : in) {
      if (a instanceof OFActionOutput o) {
        outputs++;
        OFPort p = o.getPort();
        if (p.equals(OFPort.FLOOD) || p.equals(OFPort.ALL)) {
          throw new OfError(
              OFBadActionCode.UNSUPPORTED_ORDER, "flood/all in a group bucket is not supported");
        }
        if (Translator.isStandard(p)) {
          Optional<VPort> v = t.ports().get(p.getPortNumber());
          if (v.isPresent() && v.get().k() > 1) {
            // Chained to OneSwitch's select group of the vport (the rules using this group are
            // checked to have another in_port: checkGroupIngress).
            Integer sg = t.scaleGroup(v.get().vport());
            if (sg == null) {
              throw new OfError(
                  OFFlowModFailedCode.TABLE_FULL, "no group id for vport " + v.get().vport());
            }
            for (int i = 0; i < v.get().k(); i++) {
              if (!v.get().instances().get(i).sw().equals(sw)) {
                remote = true; // its bucket toward instance i pushes the carrier tag
                t.tag(Translator.tagKey(v.get().vport(), i));
              }
            }
            out.add(F.actions().group(org.projectfloodlight.openflow.types.OFGroup.of(sg)));
            continue;
          }
          if (v.isPresent() && !v.get().sw().equals(sw)) {
            remote = true;
            out.add(F.actions().pushVlan(EthType.VLAN_FRAME));
            out.add(
                F.actions()
                    .setField(
                        F.oxms()
                            .vlanVid(
                                OFVlanVidMatch.ofVlan(
                                    t.tag(Translator.tagKey(v.get().vport(), 0))))));
            out.add(
                F.actions()
                    .output(OFPort.of(t.topo().nextHopPort(sw, v.get().sw())), o.getMaxLen()));
            continue;
          }
        }
        out.addAll(t.actions(List.of(a), sw, false, Translator.Ingress.NONE));
      } else {
        if (a.getType() == OFActionType.PUSH_VLAN) {
          vlanOwn = true;
        } else if (a instanceof OFActionSetField f) {
          MatchField<?> mf = f.getField().getMatchField();
          vlanOwn |= mf.equals(MatchField.VLAN_VID) || mf.equals(MatchField.VLAN_PCP);
        }
        out.addAll(t.actions(List.of(a), sw, false, Translator.Ingress.NONE));
      }
    }
    if (outputs > 1) {
      throw new OfError(
          OFBadActionCode.TOO_MANY, "a group bucket (an action set) holds one output");
    }
    if (remote && vlanOwn) {
      throw new OfError(
          OFBadActionCode.UNSUPPORTED_ORDER,
          "VLAN push/set_field in a bucket whose output crosses PCIe (the VLAN flow-id tag)");
    }
    return out;
  }
}
