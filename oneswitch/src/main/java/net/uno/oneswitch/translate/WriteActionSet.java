package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.function.LongFunction;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;

/**
 * Outputs inside {@code write_actions} (the paper's table X case). An action set holds one output
 * and runs in a fixed order (pops, pushes, set_fields, then group, then output), so "tag, output
 * PCIe, untag" cannot be written into it. Instead an output to vport V in a set becomes {@code
 * group:C(V)}, OneSwitch's INDIRECT <em>carrier</em> group of V on that switch, whose one bucket is
 * {@code output:P(V)} when V is local or {@code push_vlan, set vlan_vid=T(V), output:<PCIe toward
 * V>} when it is not. The set's own pushes and set_fields run before the group, so the carrier tag
 * ends outermost, as on the apply path. Every set output to a vport uses the carrier, local or not,
 * so a remap only re-points the group's bucket (a GROUP_MOD in the modify phase) and never turns an
 * accepted rule unfaithful. FLOOD/ALL in a set become {@code group:FLOOD_CARRIER}, an ALL group
 * over every mapped vport (the switch skips the bucket back to in_port, as FLOOD/ALL require). A
 * scaled vport is reached by its SELECT group directly.
 *
 * <p>Action-set precedence (OF1.3 5.10: a group in the set wins over an output; a later write of
 * the same type replaces the earlier) is kept within one set: a set with a group drops its outputs,
 * and only the last output counts. Across tables see {@link ActionSetOrder}.
 */
public final class WriteActionSet {
  /** Carrier group of vport V: CARRIER_GROUP_BASE + V, for V in 1..MAX_CARRIER_VPORT. */
  public static final int CARRIER_GROUP_BASE = 0xfff10000;

  /** Highest vport a set can output to (its carrier id must stay in the reserved range). */
  public static final int MAX_CARRIER_VPORT = 0xffff;

  /** The ALL carrier group of FLOOD/ALL in an action set. */
  public static final int FLOOD_CARRIER = 0xfff20000;

  private static final OFFactory F = MatchUtil.F;

  private final Translator t;
  private final PortMap ports;
  private final Topology topo;

  WriteActionSet(Translator t, Topology topo, PortMap ports) {
    this.t = t;
    this.topo = topo;
    this.ports = ports;
  }

  /** True if {@code group} is a carrier group id (reserved for OneSwitch). */
  public static boolean isCarrierGroup(int group) {
    return Integer.compareUnsigned(group, CARRIER_GROUP_BASE) >= 0
        && Integer.compareUnsigned(group, FLOOD_CARRIER) <= 0;
  }

  /** The carrier group ids a physical rule's action set uses. */
  public static Set<Integer> carriersOf(PhysRule p) {
    return groupsIn(p, OFInstructionWriteActions.class, WriteActionSet::isCarrierGroup);
  }

  /** The ids {@code which} accepts of the groups in {@code p}'s instructions of {@code kind}. */
  static Set<Integer> groupsIn(
      PhysRule p, Class<? extends OFInstruction> kind, java.util.function.IntPredicate which) {
    Set<Integer> out = new HashSet<>(2);
    for (OFInstruction i : p.instructions()) {
      List<OFAction> acts =
          !kind.isInstance(i)
              ? List.of()
              : i instanceof OFInstructionWriteActions w
                  ? w.getActions()
                  : ((OFInstructionApplyActions) i).getActions();
      for (OFAction a : acts) {
        if (a instanceof OFActionGroup g && which.test(g.getGroup().getGroupNumber())) {
          out.add(g.getGroup().getGroupNumber());
        }
      }
    }
    return out;
  }

  static boolean isVportOutput(OFAction a) {
    if (!(a instanceof OFActionOutput o)) {
      return false;
    }
    OFPort p = o.getPort();
    return p.equals(OFPort.FLOOD) || p.equals(OFPort.ALL) || Translator.isStandard(p);
  }

  /**
   * Translates the action set {@code in} of a rule (match {@code m}, its apply-actions {@code
   * apply}) run on switch {@code sw}.
   */
  List<OFAction> translate(
      Carrier.Frame start,
      int later,
      List<OFAction> apply,
      List<OFAction> in,
      String sw,
      Translator.Ingress ing)
      throws OfError {
    boolean hasGroup = in.stream().anyMatch(a -> a instanceof OFActionGroup);
    OFAction last = null;
    for (OFAction a : in) {
      if (a instanceof OFActionOutput) {
        last = a;
      }
    }
    Carrier.Frame f = frameAtSet(start, apply, later, in);
    List<OFAction> out = new ArrayList<>();
    for (OFAction a : in) {
      if (isVportOutput(a) && (hasGroup || a != last)) {
        continue; // never runs: the set's group (or a later output) takes precedence
      }
      if (isVportOutput(a)) {
        OFPort p = ((OFActionOutput) a).getPort();
        if (p.equals(OFPort.FLOOD) || p.equals(OFPort.ALL)) {
          flood(sw, ing, f, out);
        } else {
          vport(p.getPortNumber(), sw, ing, f, out);
        }
      } else {
        // A group in the set sees the frame after the set's pops and pushes (its buckets: VLAN).
        out.addAll(t.actions(List.of(a), sw, true, ing, f));
      }
    }
    return out;
  }

  private void vport(
      int vport, String sw, Translator.Ingress ing, Carrier.Frame f, List<OFAction> out)
      throws OfError {
    if (Integer.compareUnsigned(vport, MAX_CARRIER_VPORT) > 0) {
      throw new OfError(
          OFBadActionCode.BAD_OUT_PORT,
          "write_actions output to vport "
              + Integer.toUnsignedString(vport)
              + ": a set can output only to vports 1.."
              + MAX_CARRIER_VPORT);
    }
    Optional<VPort> ov = ports.get(vport);
    if (ov.isEmpty()) {
      // Not mapped: the carrier drops. It still replaces an output or group written earlier, as the
      // output to a missing port does in the virtual set.
      out.add(F.actions().group(OFGroup.of(CARRIER_GROUP_BASE + vport)));
      return;
    }
    VPort v = ov.get();
    if (ing != null && ing.vport() == vport && ing.port() != 0) {
      // Back to the port it came in by: dropped by the switch, as by the virtual switch.
      out.add(F.actions().output(OFPort.of(ing.port()), 0xffff));
      return;
    }
    checkCarrier(v, sw, f);
    if (v.k() > 1) {
      t.emitScaled(v, sw, ing, out); // its SELECT group (checks the ingress)
      return;
    }
    if (!v.sw().equals(sw)) {
      t.tag(Translator.tagKey(vport, 0)); // the carrier's bucket pushes it
    }
    out.add(F.actions().group(OFGroup.of(CARRIER_GROUP_BASE + vport)));
  }

  private void flood(String sw, Translator.Ingress ing, Carrier.Frame f, List<OFAction> out)
      throws OfError {
    for (VPort v : ports.all()) {
      checkCarrier(v, sw, f);
      if (v.k() > 1) {
        if (ing != null && ing.vport() == v.vport()) {
          throw new OfError(
              OFBadActionCode.UNSUPPORTED_ORDER,
              "FLOOD/ALL in write_actions from vport "
                  + Integer.toUnsignedString(v.vport())
                  + " (served by "
                  + v.k()
                  + " instances): the ALL carrier group would reach another instance of it");
        }
        t.emitScaled(v, sw, ing, new ArrayList<>()); // checks and tags; the bucket chains to it
      } else if (!v.sw().equals(sw)) {
        t.tag(Translator.tagKey(v.vport(), 0));
      }
    }
    out.add(F.actions().group(OFGroup.of(FLOOD_CARRIER)));
  }

  /**
   * The carrier bucket toward a remote vport is VLAN only. Where the apply path ({@link
   * Carrier#sendKeyed}) would not take the VLAN tag (2 known VLAN headers: a third; or, by the
   * carrier mode, a frame that may be QinQ or is MPLS: an MPLS label), a set output across PCIe is
   * refused the same way, as the apply path refuses a group whose buckets cross PCIe: never a
   * silent third VLAN header or a lost inner one.
   */
  private void checkCarrier(VPort v, String sw, Carrier.Frame f) throws OfError {
    boolean remote = v.instances().stream().anyMatch(l -> !l.sw().equals(sw));
    if (!remote || !Carrier.needsMoreThanVlan(t.carrierMode(), f)) {
      return;
    }
    throw new OfError(
        OFBadActionCode.UNSUPPORTED_ORDER,
        "write_actions output to vport "
            + Integer.toUnsignedString(v.vport())
            + " crosses the PCIe link with "
            + (f.max() >= Translator.MAX_VLAN_HEADERS
                ? Carrier.headers(f) + ", whose VLAN carrier tag would be a third"
                : "a frame the apply path carries under an MPLS label (VLAN-tagged or MPLS"
                    + " with a known eth_type)")
            + "; a set's carrier group carries only the VLAN tag (use apply_actions)");
  }

  /**
   * What is known of the frame when the set runs: {@code start} (the rule's match), this rule's
   * apply-actions, then as many headers as a later table's push may leave ({@code later}), then the
   * set's own pops and pushes (a set runs pops, push_mpls, push_pbb, push_vlan in that order).
   */
  static Carrier.Frame frameAtSet(
      Carrier.Frame start, List<OFAction> apply, int later, List<OFAction> set) throws OfError {
    Carrier.Frame f = start;
    for (OFAction a : apply) {
      f = f.after(a);
    }
    f = f.withExtra(Math.max(f.extra(), later - f.vlans()));
    for (OFActionType ty :
        List.of(
            OFActionType.POP_VLAN,
            OFActionType.POP_MPLS,
            OFActionType.POP_PBB,
            OFActionType.PUSH_MPLS,
            OFActionType.PUSH_PBB,
            OFActionType.PUSH_VLAN)) {
      for (OFAction a : set) {
        if (a.getType() == ty) {
          if (ty == OFActionType.PUSH_VLAN && f.vlans() >= Translator.MAX_VLAN_HEADERS) {
            throw new OfError(OFBadActionCode.BAD_TAG, "push_vlan onto 2 VLAN headers");
          }
          f = f.after(a);
          break; // a set holds one action of each type
        }
      }
    }
    return f;
  }

  /** The apply-actions of a rule's instructions (they run before its action set). */
  static List<OFAction> applyOf(List<OFInstruction> ins) {
    for (OFInstruction i : ins) {
      if (i instanceof OFInstructionApplyActions a) {
        return a.getActions();
      }
    }
    return List.of();
  }

  // ---------------------------------------------------------------- the carrier groups

  /**
   * The carrier group {@code id} as installed on {@code sw}: INDIRECT for a vport carrier (one
   * empty bucket, a drop, while the vport is not mapped), ALL for {@link #FLOOD_CARRIER}. Empty if
   * the vport has several instances, or a tag it needs is not live (then no rule on {@code sw} uses
   * it).
   */
  public static Optional<Map.Entry<OFGroupType, List<OFBucket>>> carrier(
      Topology topo,
      PortMap ports,
      Map<Integer, Integer> scaleGroups,
      int id,
      String sw,
      LongFunction<OptionalInt> tagOf) {
    if (id == FLOOD_CARRIER) {
      List<OFBucket> out = new ArrayList<>();
      for (VPort v : ports.all()) {
        Optional<List<OFAction>> b = bucket(topo, scaleGroups, v, sw, tagOf);
        if (b.isEmpty()) {
          return Optional.empty();
        }
        out.add(bucketOf(b.get()));
      }
      return Optional.of(Map.entry(OFGroupType.ALL, out));
    }
    Optional<VPort> v = ports.get(id - CARRIER_GROUP_BASE);
    if (v.isEmpty()) {
      return Optional.of(Map.entry(OFGroupType.INDIRECT, List.of(bucketOf(List.of()))));
    }
    if (v.get().k() > 1) {
      return Optional.empty();
    }
    return bucket(topo, scaleGroups, v.get(), sw, tagOf)
        .map(b -> Map.entry(OFGroupType.INDIRECT, List.of(bucketOf(b))));
  }

  private static Optional<List<OFAction>> bucket(
      Topology topo,
      Map<Integer, Integer> scaleGroups,
      VPort v,
      String sw,
      LongFunction<OptionalInt> tagOf) {
    if (v.k() > 1) {
      Integer g = scaleGroups.get(v.vport());
      return g == null
          ? Optional.empty()
          : Optional.of(List.<OFAction>of(F.actions().group(OFGroup.of(g))));
    }
    if (v.sw().equals(sw)) {
      return Optional.of(List.<OFAction>of(F.actions().output(OFPort.of(v.port()), 0xffff)));
    }
    OptionalInt tag = tagOf.apply(Translator.tagKey(v.vport(), 0));
    if (tag.isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(
        List.of(
            F.actions().pushVlan(EthType.VLAN_FRAME),
            F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tag.getAsInt()))),
            F.actions().output(OFPort.of(topo.nextHopPort(sw, v.sw())), 0xffff)));
  }

  private static OFBucket bucketOf(List<OFAction> acts) {
    return F.buildBucket()
        .setWeight(0)
        .setWatchPort(OFPort.ANY)
        .setWatchGroup(OFGroup.ANY)
        .setActions(acts)
        .build();
  }
}
