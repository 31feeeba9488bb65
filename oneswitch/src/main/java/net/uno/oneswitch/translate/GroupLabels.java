package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.function.LongFunction;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.U32;

/**
 * The MPLS carrier for the controller's groups (pure). A group's bucket that crosses PCIe carries
 * the VLAN flow-id tag; for a frame that may carry 2 VLAN headers (known, or a QinQ frame from an
 * earlier table: {@link Carrier#needsMoreThanVlan}) that tag would be a third. When the frame's
 * ethertype ET is known, the rule's group action goes instead to OneSwitch's <em>label variant</em>
 * of the group for ET: the same buckets, where each output across PCIe is {@code push_mpls:0x8847,
 * set_field:L(V,ET)->mpls_label, output:<PCIe port toward V>} (a bucket works on its own copy of
 * the frame, so no pop), delivered by the egress dispatch like any label of (V, ET).
 *
 * <p>A bucket is an action set on OVS (push_mpls runs before set_field, whatever the order
 * written), so a bucket that crosses PCIe may hold only its output and Ethernet address set_fields:
 * the controller's VLAN or IP-level actions there would run on the MPLS frame. Such a group, or one
 * with a bucket toward a scaled-out vport across PCIe, is refused for such a frame, as before.
 *
 * <p>Variant ids: {@link #BASE}..{@link #BASE}+{@link #COUNT}-1, one per (group, ET) in use, given
 * out by the core; reserved for OneSwitch (a controller GROUP_MOD with one gets INVALID_GROUP).
 */
public final class GroupLabels {
  public static final int BASE = 0xfff30000;
  public static final int COUNT = 0x10000;

  private static final OFFactory F = MatchUtil.F;

  private GroupLabels() {}

  /**
   * Hands out the variant id of (controller group, payload ethertype) for a rule being translated.
   */
  public interface Ids {
    int variant(int group, int ethType) throws OfError;
  }

  /** True if {@code group} is a variant id (reserved for OneSwitch). */
  public static boolean isVariant(int group) {
    return Integer.compareUnsigned(group, BASE) >= 0
        && Integer.compareUnsigned(group, BASE + COUNT) < 0;
  }

  /** The variant ids a physical rule's apply-actions use. */
  public static Set<Integer> variantsOf(PhysRule p) {
    return WriteActionSet.groupsIn(p, OFInstructionApplyActions.class, GroupLabels::isVariant);
  }

  /** The mapped single-instance vport a bucket action outputs to, if any. */
  private static Optional<VPort> vportOut(OFAction a, PortMap ports) {
    if (a instanceof OFActionOutput o && Translator.isStandard(o.getPort())) {
      return ports.get(o.getPort().getPortNumber());
    }
    return Optional.empty();
  }

  private static boolean ethAddress(OFAction a) {
    if (!(a instanceof OFActionSetField s)) {
      return false;
    }
    MatchField<?> f = s.getField().getMatchField();
    return f.equals(MatchField.ETH_SRC) || f.equals(MatchField.ETH_DST);
  }

  /** True if a bucket of {@code g} outputs across PCIe from {@code sw}. */
  static boolean crossesPcie(VirtualGroup g, String sw, PortMap ports) {
    for (OFBucket b : g.buckets()) {
      for (OFAction a : b.getActions()) {
        if (vportOut(a, ports)
            .map(v -> v.instances().stream().anyMatch(l -> !l.sw().equals(sw)))
            .orElse(false)) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * Takes the labels (V, {@code et}) of {@code g}'s buckets that cross PCIe from {@code sw}, for a
   * rule that sends a frame of ethertype {@code et} to the group's variant; refuses a group whose
   * buckets cannot carry one (see the class doc).
   */
  static void takeLabels(
      VirtualGroup g, int et, String sw, PortMap ports, Translator.TagSource tags) throws OfError {
    List<VPort> remote = new ArrayList<>();
    for (OFBucket b : g.buckets()) { // all checked before any label is taken
      List<VPort> across = new ArrayList<>();
      boolean other = false;
      for (OFAction a : b.getActions()) {
        Optional<VPort> v = vportOut(a, ports);
        if (v.isPresent() && v.get().k() > 1) {
          throw refusal(g, "a bucket toward scaled-out vport " + v.get().vport());
        }
        v.filter(x -> !x.sw().equals(sw)).ifPresent(across::add);
        other |= !(a instanceof OFActionOutput) && !ethAddress(a);
      }
      if (!across.isEmpty() && other) {
        throw refusal(
            g,
            "a bucket across PCIe with actions other than its output and Ethernet address"
                + " set_fields (they would run on the MPLS frame)");
      }
      remote.addAll(across);
    }
    for (VPort v : remote) {
      tags.tag(Carrier.mplsKey(v.vport(), et));
    }
  }

  private static OfError refusal(VirtualGroup g, String why) {
    return new OfError(
        OFBadActionCode.UNSUPPORTED_ORDER,
        "group "
            + Integer.toUnsignedString(g.groupId())
            + " sends a frame that may carry 2 VLAN headers across the PCIe link: its VLAN carrier"
            + " tag would be a third, and its MPLS label variant cannot be used: "
            + why);
  }

  /**
   * The buckets of the variant of {@code g} for ethertype {@code et} on switch {@code sw}; empty if
   * a label it needs is not live (then no rule on {@code sw} uses it).
   */
  public static Optional<List<OFBucket>> buckets(
      Topology topo,
      PortMap ports,
      VirtualGroup g,
      int et,
      String sw,
      LongFunction<OptionalInt> tagOf) {
    List<OFBucket> out = new ArrayList<>();
    for (OFBucket b : g.buckets()) {
      List<OFAction> acts = new ArrayList<>();
      for (OFAction a : b.getActions()) {
        Optional<VPort> v = vportOut(a, ports);
        if (a instanceof OFActionOutput o && Translator.isStandard(o.getPort())) {
          if (v.isEmpty()) {
            continue; // not mapped: a drop, as in the group itself
          }
          if (v.get().sw().equals(sw)) {
            acts.add(F.actions().output(OFPort.of(v.get().port()), o.getMaxLen()));
            continue;
          }
          OptionalInt label = tagOf.apply(Carrier.mplsKey(v.get().vport(), et));
          if (label.isEmpty()) {
            return Optional.empty();
          }
          acts.add(F.actions().pushMpls(EthType.MPLS_UNICAST));
          acts.add(F.actions().setField(F.oxms().mplsLabel(U32.of(label.getAsInt()))));
          acts.add(
              F.actions().output(OFPort.of(topo.nextHopPort(sw, v.get().sw())), o.getMaxLen()));
        } else {
          acts.add(a);
        }
      }
      out.add(
          F.buildBucket()
              .setWeight(b.getWeight())
              .setWatchPort(OFPort.ANY)
              .setWatchGroup(OFGroup.ANY)
              .setActions(acts)
              .build());
    }
    return Optional.of(out);
  }
}
