package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.IntPredicate;
import java.util.function.IntUnaryOperator;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBadInstructionCode;
import org.projectfloodlight.openflow.protocol.OFBadMatchCode;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketOut;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionExperimenter;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;
import org.projectfloodlight.openflow.protocol.action.OFActionSetQueue;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionClearActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionGotoTable;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteMetadata;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.protocol.oxm.OFOxm;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * Pure translation of the virtual switch onto the physical switches (docs/translation.md): the
 * ingress switch runs the whole virtual pipeline (virtual table t = physical table t+1); a packet
 * for a virtual port on another switch is tagged with the flow-id of that egress port (VLAN
 * carrier), sent over the PCIe link and untagged by the egress switch's table 0 before output.
 */
public final class Translator {
  /** Physical table 0: dispatch (reserved). */
  public static final int DISPATCH_TABLE = 0;

  public static final int PRIO_PORT = 100;
  public static final int PRIO_TAG = 200;

  /**
   * OneSwitch's own SELECT groups (one per scaled-out vport) use ids SCALE_GROUP_BASE ..
   * SCALE_GROUP_BASE + SCALE_GROUP_COUNT - 1; a controller cannot use them (INVALID_GROUP).
   */
  public static final int SCALE_GROUP_BASE = 0xfff00000;

  public static final int SCALE_GROUP_COUNT = 4096;

  /** Most instances one virtual port may have. */
  public static final int MAX_INSTANCES = 16;

  /** True if {@code group} is in OneSwitch's reserved range. */
  public static boolean isScaleGroup(int group) {
    return Integer.compareUnsigned(group, SCALE_GROUP_BASE) >= 0
        && Integer.compareUnsigned(group, SCALE_GROUP_BASE + SCALE_GROUP_COUNT) < 0;
  }

  /**
   * The flow-id tag key of instance {@code slot} of egress vport {@code vport}. Slot 0 is the vport
   * itself, so a single-instance port keeps its tag across a remap (frames in flight follow it).
   */
  public static long tagKey(int vport, int slot) {
    return Integer.toUnsignedLong(vport) | ((long) slot << 32);
  }

  /** The vport of a tag key. */
  public static int tagVport(long key) {
    return (int) key;
  }

  /** The instance slot of a tag key. */
  public static int tagSlot(long key) {
    return (int) ((key >>> 32) & 0xff); // above: the MPLS carrier's bits (Carrier.mplsKey)
  }

  /** Hands out the flow-id tag of a {@link #tagKey} (and records that the caller uses it). */
  public interface TagSource {
    int tag(long key) throws OfError;
  }

  /**
   * Where the packet a rule handles came in: vport {@code vport} through physical {@code port} (the
   * rule matches in_port); {@link #NONE} for a packet-out from CONTROLLER; null = unknown (a rule
   * with a wildcard in_port).
   */
  public record Ingress(int vport, int port) {
    public static final Ingress NONE = new Ingress(0, 0);

    /**
     * The {@code port} of a packet handed off to this switch from {@code vport} ({@link Offload}):
     * it came in elsewhere, so an output back to {@code vport} is a drop and IN_PORT is {@code
     * vport} itself.
     */
    public static final int HANDED = -1;

    boolean handed() {
      return port == HANDED;
    }
  }

  private static final OFFactory F = MatchUtil.F;

  private final Topology topo;
  private final PortMap ports;
  private final int virtualTables;
  private final TagSource tags;
  private final IntPredicate groupExists;
  private final Map<Integer, Integer> scaleGroups;
  private final java.util.function.IntFunction<VirtualGroup> groupOf;
  private Carrier.Mode carrierMode = Carrier.Mode.AUTO;
  private IntUnaryOperator depth = t -> VlanPushOrder.WIRE;
  private IntUnaryOperator later = t -> 0;
  private GroupLabels.Ids groupIds;
  private Offload off = Offload.NONE;
  private Offload.MetaFacts meta =
      new Offload.MetaFacts() {
        @Override
        public boolean matchedFrom(int t) {
          return true;
        }

        @Override
        public boolean writtenBefore(int t) {
          return true;
        }
      };

  public Translator(
      Topology topo, PortMap ports, int virtualTables, TagSource tags, IntPredicate groupExists) {
    this(topo, ports, virtualTables, tags, groupExists, Map.of());
  }

  /**
   * {@code scaleGroups}: the id of OneSwitch's SELECT group of each vport with several instances.
   */
  public Translator(
      Topology topo,
      PortMap ports,
      int virtualTables,
      TagSource tags,
      IntPredicate groupExists,
      Map<Integer, Integer> scaleGroups) {
    this(topo, ports, virtualTables, tags, groupExists, scaleGroups, g -> null);
  }

  /**
   * {@code groupOf}: the controller's group by id (null if none), to check that a rule using a
   * group whose buckets output to a scaled-out vport cannot have come in through that vport.
   */
  public Translator(
      Topology topo,
      PortMap ports,
      int virtualTables,
      TagSource tags,
      IntPredicate groupExists,
      Map<Integer, Integer> scaleGroups,
      java.util.function.IntFunction<VirtualGroup> groupOf) {
    this.groupOf = groupOf;
    this.topo = topo;
    this.ports = ports;
    this.virtualTables = virtualTables;
    this.tags = tags;
    this.groupExists = groupExists;
    this.scaleGroups = scaleGroups;
  }

  /** Takes flow-id tag {@code key} for the rule being translated. */
  int tag(long key) throws OfError {
    return tags.tag(key);
  }

  /** Sets the flow-id carrier mode (default AUTO); returns this. */
  public Translator carrier(Carrier.Mode mode) {
    this.carrierMode = mode;
    return this;
  }

  /**
   * Lets groups take the MPLS carrier: {@code ids} hands out the label variant ids ({@link
   * GroupLabels}); returns this. Without it such groups are refused.
   */
  public Translator groupLabels(GroupLabels.Ids ids) {
    this.groupIds = ids;
    return this;
  }

  /**
   * Sets where each virtual table runs ({@link Offload}) and what the rules do with metadata
   * ({@code meta}, for the checks of a handoff); returns this. Default: every table everywhere.
   */
  public Translator offload(Offload o, Offload.MetaFacts meta) {
    this.off = o;
    this.meta = meta;
    return this;
  }

  /** Where each virtual table runs. */
  public Offload offload() {
    return off;
  }

  /**
   * The handoff rules of the offload (empty without one): the tags they take are the caller's
   * ({@link OffloadRules#handoffs}).
   */
  public List<PhysRule> handoffs() throws OfError {
    if (!off.any()) {
      return List.of();
    }
    return new OffloadRules(this, topo, ports, off, meta).handoffs(depth);
  }

  /** The flow-id carrier mode. */
  Carrier.Mode carrierMode() {
    return carrierMode;
  }

  /**
   * Sets the most VLAN headers a frame may carry when it enters each virtual table ({@link
   * VlanPushOrder#depth}); returns this. Default: one (a frame that came in tagged).
   */
  public Translator depth(IntUnaryOperator d) {
    this.depth = d;
    return this;
  }

  /**
   * Sets the most VLAN headers a later table's push may leave a frame with when the action set runs
   * ({@link VlanPushOrder#later}); returns this. Default: none.
   */
  public Translator later(IntUnaryOperator l) {
    this.later = l;
    return this;
  }

  /**
   * What later tables' pushes may leave on {@code r}'s frame when its action set runs (0: none).
   */
  private int laterOf(VirtualRule r) {
    int next = VlanPushOrder.setGoesOn(r);
    return next < 0 ? 0 : later.applyAsInt(next);
  }

  /**
   * The frame rule {@code r} sees: its match, and the headers it may carry beyond what the match
   * shows (none if it matches "no VLAN"; else up to the table's depth).
   */
  Carrier.Frame frameOf(VirtualRule r) {
    Carrier.Frame f = Carrier.Frame.of(r.match());
    if (MatchUtil.vlanAbsent(r.match())) {
      return f;
    }
    return f.withExtra(Math.max(0, depth.applyAsInt(r.table()) - f.vlans()));
  }

  /** Switches that run the replicated pipeline: those with at least one mapped port. */
  public List<String> ingressSwitches() {
    List<String> out = new ArrayList<>();
    for (String s : topo.switches()) {
      if (ports.hasPortsOn(s)) {
        out.add(s);
      }
    }
    return out;
  }

  /**
   * The switch that runs the pipeline for PACKET_OUTs from CONTROLLER with output:TABLE: the host
   * switch if it has mapped ports, else the first switch that has; empty if none has.
   */
  public Optional<String> controllerSwitch() {
    if (ports.hasPortsOn(topo.host())) {
      return Optional.of(topo.host());
    }
    List<String> sws = ingressSwitches();
    return sws.isEmpty() ? Optional.empty() : Optional.of(sws.get(0));
  }

  // ---------------------------------------------------------------- validation (state-independent)

  /** Checks a virtual rule for things no port map could make valid; throws the OpenFlow error. */
  public static void validate(VirtualRule r, int virtualTables) throws OfError {
    if (r.table() < 0 || r.table() >= virtualTables) {
      throw new OfError(OFFlowModFailedCode.BAD_TABLE_ID, "table " + r.table());
    }
    validateMatch(r.match());
  }

  static void validateMatch(Match m) throws OfError {
    for (OFOxm<?> o : MatchUtil.oxms(m)) {
      MatchField<?> f = o.getMatchField();
      if (f.id == MatchField.IN_PHY_PORT.id) {
        throw new OfError(OFBadMatchCode.BAD_FIELD, "in_phy_port cannot be carried");
      }
      if (f.id == MatchField.IN_PORT.id) {
        if (o.isMasked()) {
          throw new OfError(OFBadMatchCode.BAD_MASK, "in_port cannot be masked");
        }
        OFPort p = (OFPort) o.getValue();
        if (!isStandard(p)) {
          throw new OfError(OFBadMatchCode.BAD_VALUE, "in_port " + p + " is not a port");
        }
      }
    }
  }

  static boolean isStandard(OFPort p) {
    return Integer.compareUnsigned(p.getPortNumber(), 0) > 0
        && Integer.compareUnsigned(p.getPortNumber(), OFPort.MAX.getPortNumber()) <= 0;
  }

  // ---------------------------------------------------------------- rules

  /** Physical rules of a virtual rule; empty if its in_port is not mapped. */
  public List<PhysRule> rule(VirtualRule r) throws OfError {
    validate(r, virtualTables);
    if (off.any()) {
      return new OffloadRules(this, topo, ports, off, meta).rule(r);
    }
    Optional<OFPort> in = MatchUtil.inPort(r.match());
    List<PhysRule> out = new ArrayList<>();
    if (in.isPresent()) {
      int vport = in.get().getPortNumber();
      Optional<VPort> vp = ports.get(vport);
      if (vp.isEmpty()) {
        // Check the instructions even when the port is unmapped: errors must not depend on the map.
        instructions(r, topo.host(), new Ingress(vport, 0));
        return out;
      }
      // One replica per instance (like a wildcard in_port over several switches): each matches
      // its own physical port and knows it, so output:V back to V stays the dropped output to
      // in_port it is on the virtual switch.
      // A draining port (it left V a moment ago) gets its replica too: what the leaving instance
      // still emits is in_port=V. Nothing is ever sent to it (outputs use the instances only).
      List<VPort.Loc> ingress = new ArrayList<>(vp.get().instances());
      ports.drainsOf(vport).forEach(d -> ingress.add(d.loc()));
      for (VPort.Loc l : ingress) {
        Match m = MatchUtil.withInPort(r.match(), OFPort.of(l.port()));
        List<OFInstruction> ins = instructions(r, l.sw(), new Ingress(vport, l.port()));
        out.add(new PhysRule(l.sw(), r.table() + 1, r.priority(), m, ins));
      }
      return out;
    }
    List<String> sws = ingressSwitches();
    if (sws.isEmpty()) {
      instructions(r, topo.host(), null); // validation only
    }
    for (String sw : sws) {
      out.add(new PhysRule(sw, r.table() + 1, r.priority(), r.match(), instructions(r, sw, null)));
    }
    return out;
  }

  List<OFInstruction> instructions(VirtualRule r, String sw, Ingress ing) throws OfError {
    List<OFInstruction> out = new ArrayList<>();
    Set<String> seen = new java.util.HashSet<>();
    for (OFInstruction i : r.instructions()) {
      if (!seen.add(i.getType().name())) {
        throw new OfError(OFBadInstructionCode.DUP_INST, "duplicate " + i.getType());
      }
      if (ing != null && ing.handed()) {
        checkHanded(r, i);
      }
      if (i instanceof OFInstructionApplyActions a) {
        checkVlanDepth(r.match(), a.getActions());
        out.add(F.instructions().applyActions(actions(a.getActions(), sw, false, ing, frameOf(r))));
      } else if (i instanceof OFInstructionWriteActions w) {
        List<OFAction> set =
            new WriteActionSet(this, topo, ports)
                .translate(
                    frameOf(r),
                    laterOf(r),
                    WriteActionSet.applyOf(r.instructions()),
                    w.getActions(),
                    sw,
                    ing);
        out.add(F.instructions().writeActions(set));
      } else if (i instanceof OFInstructionGotoTable g) {
        int t = g.getTableId().getValue();
        if (t <= r.table() || t >= virtualTables) {
          throw new OfError(OFBadInstructionCode.BAD_TABLE_ID, "goto_table:" + t);
        }
        out.add(F.instructions().gotoTable(TableId.of(t + 1)));
      } else if (i instanceof OFInstructionWriteMetadata
          || i instanceof OFInstructionClearActions) {
        out.add(i);
      } else {
        throw new OfError(OFBadInstructionCode.UNSUP_INST, "instruction " + i.getType());
      }
    }
    return out;
  }

  /**
   * A copy for packets handed off from another switch: the physical groups and the action set's
   * carrier groups do not know the virtual in_port (an output back to it must be a drop), so they
   * are refused there.
   */
  private static void checkHanded(VirtualRule r, OFInstruction i) throws OfError {
    List<OFAction> acts =
        i instanceof OFInstructionApplyActions a
            ? a.getActions()
            : i instanceof OFInstructionWriteActions w ? w.getActions() : List.of();
    boolean set = i instanceof OFInstructionWriteActions;
    for (OFAction a : acts) {
      if (a instanceof OFActionGroup || set && a instanceof OFActionOutput) {
        throw new OfError(
            OFBadActionCode.UNSUPPORTED_ORDER,
            OffloadRules.what(r)
                + "runs after a table offload's handoff, where its "
                + (set ? "action set's output or group" : "group")
                + " would not know the packet's virtual in_port");
      }
    }
  }

  /** OVS (like the 802.1ad model it follows) handles at most this many VLAN headers. */
  static final int MAX_VLAN_HEADERS = 2;

  /**
   * Refuses up front what the physical switch would refuse: a packet known (from the match and the
   * actions before) to carry 2 VLAN headers cannot take a third push_vlan of its own. (Its output
   * across PCIe takes the MPLS carrier or is refused: {@link Carrier#sendKeyed}.)
   */
  void checkVlanDepth(Match m, List<OFAction> acts) throws OfError {
    int depth = MatchUtil.vlanPresent(m) ? 1 : 0;
    for (OFAction a : acts) {
      switch (a.getType()) {
        case PUSH_VLAN -> {
          if (++depth > MAX_VLAN_HEADERS) {
            throw new OfError(OFBadActionCode.BAD_TAG, "push_vlan onto 2 VLAN headers");
          }
        }
        case POP_VLAN -> depth = Math.max(0, depth - 1);
        default -> {}
      }
    }
  }

  /**
   * Translates an action list executed on switch {@code sw}. An output to a virtual port, FLOOD or
   * ALL in an action set ({@code set}) is refused here: {@link WriteActionSet} carries those.
   */
  public List<OFAction> actions(List<OFAction> in, String sw, boolean set, Ingress ing)
      throws OfError {
    return actions(in, sw, set, ing, Carrier.Frame.UNKNOWN);
  }

  /** As above, for a frame known to be {@code frame} before the first action. */
  List<OFAction> actions(
      List<OFAction> in, String sw, boolean set, Ingress ing, Carrier.Frame frame) throws OfError {
    List<OFAction> out = new ArrayList<>();
    Carrier.Frame f = frame;
    int lastL4Set = -1; // the last set_field needing the IP protocol (see Carrier.sendKeyed)
    for (int i = 0; i < in.size(); i++) {
      if (in.get(i) instanceof OFActionSetField s
          && Carrier.needsIpProto(s.getField().getMatchField())) {
        lastL4Set = i;
      }
    }
    for (int i = 0; i < in.size(); i++) {
      OFAction a = in.get(i);
      Carrier.Frame before = f;
      f = f.after(a);
      if (a instanceof OFActionOutput o) {
        output(o, sw, set, ing, before, i < lastL4Set, out);
      } else if (a instanceof OFActionGroup g) {
        if (!groupExists.test(g.getGroup().getGroupNumber())) {
          throw new OfError(OFBadActionCode.BAD_OUT_GROUP, "group " + g.getGroup() + " unknown");
        }
        checkGroupIngress(g.getGroup().getGroupNumber(), ing);
        out.add(group(g, before, sw, set));
      } else if (a instanceof OFActionSetField s) {
        int id = s.getField().getMatchField().id.ordinal();
        if (id == MatchField.IN_PORT.id.ordinal() || id == MatchField.IN_PHY_PORT.id.ordinal()) {
          throw new OfError(OFBadActionCode.BAD_SET_TYPE, "set_field on in_port");
        }
        out.add(a);
      } else if (a instanceof OFActionSetQueue) {
        throw new OfError(OFBadActionCode.BAD_QUEUE, "queues are not virtualised");
      } else if (a instanceof OFActionExperimenter) {
        throw new OfError(OFBadActionCode.BAD_EXPERIMENTER, "experimenter action");
      } else {
        out.add(a); // push/pop vlan/mpls/pbb, ttl actions: position-independent
      }
    }
    return out;
  }

  private void output(
      OFActionOutput o,
      String sw,
      boolean set,
      Ingress ing,
      Carrier.Frame f,
      boolean l4After,
      List<OFAction> out)
      throws OfError {
    OFPort p = o.getPort();
    if (p.equals(OFPort.IN_PORT) && ing != null && ing.handed()) {
      // Handed off: the packet came in by vport ing.vport() on another switch; send it there.
      Optional<VPort> back = ports.get(ing.vport());
      if (back.isPresent()) {
        emit(back.get(), o.getMaxLen(), sw, null, f, l4After, out);
      }
      return;
    }
    if (p.equals(OFPort.CONTROLLER) || p.equals(OFPort.IN_PORT)) {
      out.add(o);
      return;
    }
    if (p.equals(OFPort.FLOOD) || p.equals(OFPort.ALL)) {
      if (set) {
        throw new OfError(
            OFBadActionCode.UNSUPPORTED_ORDER, "flood/all in an action set is not supported");
      }
      // Output to the ingress port itself is dropped by the switch, as FLOOD/ALL require.
      for (VPort v : ports.all()) {
        emit(v, o.getMaxLen(), sw, ing, f, l4After, out);
      }
      return;
    }
    if (!isStandard(p)) {
      throw new OfError(OFBadActionCode.BAD_OUT_PORT, "output:" + p + " is not supported");
    }
    if (set) {
      throw new OfError(
          OFBadActionCode.UNSUPPORTED_ORDER,
          "output to a port in write_actions is not supported (use apply_actions)");
    }
    Optional<VPort> v = ports.get(p.getPortNumber());
    if (v.isPresent()) {
      emit(v.get(), o.getMaxLen(), sw, ing, f, l4After, out);
    }
    // Unmapped port: the packet goes nowhere, as on a switch whose port vanished.
  }

  private void emit(
      VPort v,
      int maxLen,
      String sw,
      Ingress ing,
      Carrier.Frame f,
      boolean l4After,
      List<OFAction> out)
      throws OfError {
    if (v.k() > 1) {
      if (f.max() >= MAX_VLAN_HEADERS && v.instances().stream().anyMatch(l -> !l.sw().equals(sw))) {
        throw new OfError(
            OFBadActionCode.UNSUPPORTED_ORDER,
            "output to scaled-out vport "
                + Integer.toUnsignedString(v.vport())
                + " with 2 VLAN headers: its select group's VLAN carrier would be a third");
      }
      emitScaled(v, sw, ing, out);
      return;
    }
    if (ing != null && ing.vport() == v.vport() && ing.handed()) {
      return; // handed off from v: output back to its in_port, which the virtual switch drops
    }
    if (ing != null && ing.vport() == v.vport() && ing.port() != 0) {
      // Back to the port it came in by (a draining port's replica too): the switch drops output
      // to in_port, as the virtual switch does.
      out.add(F.actions().output(OFPort.of(ing.port()), maxLen));
      return;
    }
    if (v.sw().equals(sw)) {
      out.add(F.actions().output(OFPort.of(v.port()), maxLen));
      return;
    }
    Carrier.sendKeyed(
        carrierMode,
        f,
        Integer.toUnsignedLong(v.vport()),
        tags,
        topo.nextHopPort(sw, v.sw()),
        maxLen,
        true,
        l4After,
        out);
  }

  /**
   * The group action for a frame known as {@code f}: the controller's group itself, or, when its
   * buckets cross PCIe with a frame that may carry 2 VLAN headers (their VLAN carrier tag would be
   * a third), its MPLS label variant for the frame's known ethertype ({@link GroupLabels}); refused
   * where neither carries it (unknown ethertype, an action set, no variant ids: mode {@code vlan}).
   */
  private OFAction group(OFActionGroup a, Carrier.Frame f, String sw, boolean set) throws OfError {
    int id = a.getGroup().getGroupNumber();
    VirtualGroup g = groupOf.apply(id);
    if (g == null || f.max() < MAX_VLAN_HEADERS || !GroupLabels.crossesPcie(g, sw, ports)) {
      return a;
    }
    String what = "group " + Integer.toUnsignedString(id);
    if (f.ethType() < 0 || set || groupIds == null || carrierMode == Carrier.Mode.VLAN) {
      throw new OfError(
          OFBadActionCode.UNSUPPORTED_ORDER,
          what
              + " sends "
              + Carrier.headers(f)
              + " across the PCIe link, where its VLAN carrier tag would be a third"
              + (f.ethType() < 0
                  ? " (an MPLS label needs a known eth_type: match it exactly)"
                  : set ? " (a group in an action set takes no MPLS label)" : ""));
    }
    GroupLabels.takeLabels(g, f.ethType(), sw, ports, tags);
    return F.actions().group(OFGroup.of(groupIds.variant(id, f.ethType())));
  }

  /**
   * A controller group whose bucket outputs to a scaled-out vport W reaches one instance of W by
   * OneSwitch's select group; that is faithful only if the packet did not come in through W (the
   * virtual switch drops output to in_port, another instance would not). So the rule using the
   * group must match an in_port other than W.
   */
  private void checkGroupIngress(int group, Ingress ing) throws OfError {
    VirtualGroup g = groupOf.apply(group);
    if (g == null) {
      return;
    }
    for (OFBucket b : g.buckets()) {
      for (OFAction a : b.getActions()) {
        if (a instanceof OFActionOutput o && isStandard(o.getPort())) {
          Optional<VPort> w = ports.get(o.getPort().getPortNumber());
          if (w.isPresent() && w.get().k() > 1 && (ing == null || ing.vport() == w.get().vport())) {
            throw new OfError(
                OFBadActionCode.BAD_OUT_PORT,
                "group "
                    + Integer.toUnsignedString(group)
                    + " outputs to vport "
                    + Integer.toUnsignedString(w.get().vport())
                    + " (served by "
                    + w.get().k()
                    + " instances): a rule using it must match an in_port other than "
                    + Integer.toUnsignedString(w.get().vport()));
          }
        }
      }
    }
  }

  /**
   * Output to a vport served by several instances: OneSwitch's SELECT group of the vport on this
   * switch (OVS hashes the flow, so a flow sticks to one instance while the set is unchanged).
   */
  void emitScaled(VPort v, String sw, Ingress ing, List<OFAction> out) throws OfError {
    if (ing == null) {
      throw new OfError(
          OFBadActionCode.BAD_OUT_PORT,
          "output to vport "
              + Integer.toUnsignedString(v.vport())
              + " (served by "
              + v.k()
              + " instances) from a rule without in_port: a packet that came in through it would"
              + " reach another instance, where the virtual switch drops it (match in_port)");
    }
    if (ing.vport() == v.vport() && ing.handed()) {
      return; // handed off from v: output back to its in_port, which the virtual switch drops
    }
    if (ing.vport() == v.vport()) {
      // Back to the port it came in by: the switch drops output to in_port, as the virtual one.
      out.add(F.actions().output(OFPort.of(ing.port()), 0xffff));
      return;
    }
    Integer g = scaleGroups.get(v.vport());
    if (g == null) {
      throw new OfError(
          OFFlowModFailedCode.TABLE_FULL, "no group id for vport " + v.vport() + " (internal)");
    }
    for (int i = 0; i < v.k(); i++) {
      if (!v.instances().get(i).sw().equals(sw)) {
        tags.tag(tagKey(v.vport(), i)); // the group's bucket toward instance i carries this tag
      }
    }
    out.add(F.actions().group(org.projectfloodlight.openflow.types.OFGroup.of(g)));
  }

  /**
   * Buckets of OneSwitch's SELECT group of scaled-out {@code v} on switch {@code sw} ({@link
   * GroupBuckets#scale}); empty if a tag is not live.
   */
  public Optional<List<OFBucket>> scaleBuckets(
      VPort v, String sw, java.util.function.LongFunction<java.util.OptionalInt> tagOf) {
    return GroupBuckets.scale(topo, v, sw, tagOf);
  }

  /** Buckets of a virtual group as installed on {@code sw} ({@link GroupBuckets}). */
  public List<OFBucket> buckets(VirtualGroup g, String sw) throws OfError {
    return new GroupBuckets(this).of(g, sw);
  }

  /** The reserved table-0 rules of every switch for the current port map and live tags. */
  public List<PhysRule> dispatch(Map<Long, Integer> liveTags) {
    return Dispatch.rules(topo, ports, controllerSwitch(), liveTags, off);
  }

  /** A PACKET_OUT to execute on switch {@code sw}. */
  public record PhysPacketOut(String sw, OFPacketOut msg) {}

  /** Maps a virtual PACKET_OUT onto the physical switch that executes it ({@link Packets}). */
  public PhysPacketOut packetOut(OFPacketOut po) throws OfError {
    return Packets.out(this, po);
  }

  /**
   * Maps a physical PACKET_IN back to the virtual switch ({@link Packets}); empty if it does not
   * belong to it.
   */
  public Optional<OFPacketIn> packetIn(String sw, OFPacketIn pin, U64 virtualCookie) {
    return Packets.in(topo, ports, sw, pin, virtualCookie);
  }

  Topology topo() {
    return topo;
  }

  PortMap ports() {
    return ports;
  }

  /** The SELECT group id of scaled-out vport {@code vport}, or null. */
  Integer scaleGroup(int vport) {
    return scaleGroups.get(vport);
  }

  /** Flow-mod flags OneSwitch supports on virtual rules. */
  public static final Set<org.projectfloodlight.openflow.protocol.OFFlowModFlags> FLAGS =
      EnumSet.of(
          org.projectfloodlight.openflow.protocol.OFFlowModFlags.SEND_FLOW_REM,
          org.projectfloodlight.openflow.protocol.OFFlowModFlags.CHECK_OVERLAP,
          org.projectfloodlight.openflow.protocol.OFFlowModFlags.RESET_COUNTS,
          org.projectfloodlight.openflow.protocol.OFFlowModFlags.NO_PKT_COUNTS,
          org.projectfloodlight.openflow.protocol.OFFlowModFlags.NO_BYT_COUNTS);
}
