package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBadMatchCode;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionGotoTable;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteMetadata;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.protocol.oxm.OFOxm;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.U64;

/**
 * The translation of virtual rules under table offload ({@link Offload}; README "Table offload"),
 * pure. A table located on L has its rules on L only; every other switch's physical table for it
 * holds the handoff rules ({@link #handoffs}) that carry a packet to L. On L, from the first table
 * located there on, a packet handed off from virtual in_port V carries {@code tunnel_id=code(V)}:
 * rules matching {@code in_port=V} get a copy there matching that code, and a rule without in_port
 * whose actions depend on the in_port (outputs, groups) is split into its local part ({@code
 * tunnel_id=0}) and one copy per possible source. What cannot be carried exactly is refused (fail
 * closed).
 */
final class OffloadRules {
  private static final OFFactory F = MatchUtil.F;

  /**
   * Priority of the handoff rules: above every rule. A handoff stands in for a whole table, and
   * where a move puts the table's rules beside it (its new place, before the handoff goes; its old
   * place, after the new handoff came) they stay shadowed: the switch runs either the handoff or
   * the whole table, never a table half installed or half removed, and never ties with a
   * table-miss.
   */
  static final int PRIO_HANDOFF = 0xffff;

  /**
   * Priority of a split table's handoff of the host's own packets: below every rule the host keeps
   * of it (a split's {@code host_min_priority} is at least 1).
   */
  static final int PRIO_SPLIT_HANDOFF = 0;

  private final Translator t;
  private final Topology topo;
  private final PortMap ports;
  private final Offload off;
  private final Offload.MetaFacts meta;

  OffloadRules(Translator t, Topology topo, PortMap ports, Offload off, Offload.MetaFacts meta) {
    this.t = t;
    this.topo = topo;
    this.ports = ports;
    this.off = off;
    this.meta = meta;
  }

  /** The physical rules of {@code r} under the offload. */
  List<PhysRule> rule(VirtualRule r) throws OfError {
    check(r);
    int table = r.table();
    List<String> runs = runs(table);
    List<PhysRule> out = new ArrayList<>();
    Optional<OFPort> in = MatchUtil.inPort(r.match());
    if (in.isPresent()) {
      int vport = in.get().getPortNumber();
      Optional<VPort> vp = ports.get(vport);
      if (vp.isEmpty()) {
        t.instructions(r, topo.host(), new Translator.Ingress(vport, 0)); // validation only
        return out;
      }
      for (VPort.Loc l : ingress(vport)) {
        if (off.runsOn(table, l.sw()) || hostPart(r, l.sw())) {
          Match m = MatchUtil.withInPort(r.match(), OFPort.of(l.port()));
          out.add(
              new PhysRule(
                  l.sw(),
                  table + 1,
                  r.priority(),
                  m,
                  t.instructions(r, l.sw(), new Translator.Ingress(vport, l.port()))));
        }
      }
      for (String sw : runs) {
        if (receives(sw, table) && sources(sw).contains(vport)) {
          handedCopies(r, sw, vport, out);
        }
      }
      return out;
    }
    if (runs.isEmpty()) {
      t.instructions(r, topo.host(), null); // validation only
    }
    if (hostPart(r, topo.host())) {
      // The host's own packets only: the packets it received by a handoff meet the relaying
      // handoffs above every rule (and the whole table on L).
      out.add(
          new PhysRule(
              topo.host(),
              table + 1,
              r.priority(),
              r.match(),
              t.instructions(r, topo.host(), null)));
    }
    List<String> local = t.ingressSwitches();
    for (String sw : runs) {
      if (!receives(sw, table) || !dependsOnInPort(r)) {
        out.add(new PhysRule(sw, table + 1, r.priority(), r.match(), t.instructions(r, sw, null)));
        continue;
      }
      if (local.contains(sw)) {
        out.add(
            new PhysRule(
                sw,
                table + 1,
                r.priority(),
                withTunnel(r.match(), 0),
                t.instructions(r, sw, null)));
      }
      for (int v : sources(sw)) {
        handedCopies(r, sw, v, out);
      }
    }
    return out;
  }

  /**
   * The copies of {@code r} on {@code sw} for packets handed off from virtual in_port {@code v}:
   * one per PCIe port such a packet may come in by, matching it and {@code tunnel_id=code(v)}. An
   * output back through that port is {@code output:IN_PORT} (the switch drops an output to the
   * in_port by number).
   */
  private void handedCopies(VirtualRule r, String sw, int v, List<PhysRule> out) throws OfError {
    List<OFInstruction> ins = t.instructions(r, sw, handed(v));
    for (int a : arrivals(sw, v)) {
      Match m = withTunnel(MatchUtil.withInPort(r.match(), OFPort.of(a)), Offload.code(v));
      out.add(new PhysRule(sw, r.table() + 1, r.priority(), m, backByInPort(ins, a)));
    }
  }

  /**
   * The PCIe ports of {@code sw} a packet of virtual in_port {@code v} may be handed off to it by:
   * those toward the switches {@code v} is on (its instances, draining ports; CONTROLLER: the
   * switch that runs packet-outs' pipelines), every one if a packet may leave {@code sw} and come
   * back.
   */
  private List<Integer> arrivals(String sw, int v) {
    if (off.bounces(sw) || !sw.equals(topo.host())) {
      return topo.pciePorts(sw);
    }
    Set<String> from = new LinkedHashSet<>();
    ports.get(v).ifPresent(x -> x.instances().forEach(l -> from.add(l.sw())));
    ports.drainsOf(v).forEach(d -> from.add(d.loc().sw()));
    if (v == OFPort.CONTROLLER.getPortNumber()) {
      t.controllerSwitch().ifPresent(from::add);
    }
    List<Integer> out = new ArrayList<>();
    for (String s : from) {
      if (!s.equals(sw)) {
        out.add(topo.nextHopPort(sw, s));
      }
    }
    return out;
  }

  /** {@code ins} with every apply-actions output to port {@code a} made {@code output:IN_PORT}. */
  static List<OFInstruction> backByInPort(List<OFInstruction> ins, int a) {
    List<OFInstruction> out = new ArrayList<>();
    for (OFInstruction i : ins) {
      if (i instanceof OFInstructionApplyActions ap) {
        List<OFAction> acts = new ArrayList<>();
        for (OFAction x : ap.getActions()) {
          acts.add(
              x instanceof OFActionOutput o && o.getPort().equals(OFPort.of(a))
                  ? F.actions().output(OFPort.IN_PORT, o.getMaxLen())
                  : x);
        }
        out.add(F.instructions().applyActions(acts));
      } else {
        out.add(i);
      }
    }
    return out;
  }

  /**
   * The handoff rules: on every switch S but L, physical table t+1 of a table t located on L sends
   * each packet that reaches it to L, tagged with (virtual in_port, t). {@code depth}: the most
   * VLAN headers a frame may carry into each table.
   */
  List<PhysRule> handoffs(java.util.function.IntUnaryOperator depth) throws OfError {
    List<PhysRule> out = new ArrayList<>();
    Optional<String> ctl = t.controllerSwitch();
    for (var e : off.locations().entrySet()) {
      int table = e.getKey();
      String to = e.getValue();
      for (String sw : topo.switches()) {
        if (sw.equals(to)) {
          continue;
        }
        List<Object[]> from = new ArrayList<>(); // {vport, match}
        for (VPort v : ports.all()) {
          for (VPort.Loc l : v.instances()) {
            if (l.sw().equals(sw)) {
              from.add(new Object[] {v.vport(), inPortMatch(OFPort.of(l.port()))});
            }
          }
        }
        for (Drain d : ports.drains()) {
          if (d.loc().sw().equals(sw)) {
            from.add(new Object[] {d.vport(), inPortMatch(OFPort.of(d.loc().port()))});
          }
        }
        if (ctl.isPresent() && ctl.get().equals(sw)) {
          from.add(
              new Object[] {OFPort.CONTROLLER.getPortNumber(), inPortMatch(OFPort.CONTROLLER)});
        }
        if (receives(sw, table - 1)) {
          for (int v : sources(sw)) {
            for (int a : arrivals(sw, v)) {
              from.add(new Object[] {v, withTunnel(inPortMatch(OFPort.of(a)), Offload.code(v))});
            }
          }
        }
        Set<String> seen = new java.util.HashSet<>();
        for (Object[] f : from) {
          int v = (Integer) f[0];
          Match m = (Match) f[1];
          if (!seen.add(m.toString())) {
            continue;
          }
          List<OFAction> acts = new ArrayList<>();
          Carrier.Frame fr = new Carrier.Frame(0, -1, depth.applyAsInt(table), -1);
          try {
            Carrier.sendKeyed(
                t.carrierMode(),
                fr,
                Offload.handoffKey(v, table),
                t::tag,
                topo.nextHopPort(sw, to),
                0xffff,
                false,
                false,
                acts);
          } catch (OfError err) {
            throw new OfError(
                err.code(),
                "table "
                    + table
                    + " cannot be handed off to "
                    + to
                    + ": a frame entering it may carry 2 VLAN headers, and the handoff's VLAN tag"
                    + " would be a third (its ethertype is not known there)");
          }
          List<OFInstruction> ins = List.of(F.instructions().applyActions(acts));
          Optional<OFPort> arrived = MatchUtil.inPort(m);
          if (arrived.isPresent() && topo.isPciePort(sw, arrived.get().getPortNumber())) {
            ins = backByInPort(ins, arrived.get().getPortNumber());
          }
          // A split table's host hands its own packets off below its high part (the table's
          // lower rules are only on L), the packets it relays above everything.
          boolean local = MatchUtil.inPort(m).isPresent() && !isTunnel(m);
          int prio =
              sw.equals(topo.host()) && local && off.hostMin(table).isPresent()
                  ? PRIO_SPLIT_HANDOFF
                  : PRIO_HANDOFF;
          out.add(new PhysRule(sw, table + 1, prio, m, ins).late());
        }
      }
    }
    return out;
  }

  // ------------------------------------------------------------------ checks

  /** Refuses what a handoff cannot carry exactly; names the rule. */
  private void check(VirtualRule r) throws OfError {
    for (OFOxm<?> o : MatchUtil.oxms(r.match())) {
      if (o.getMatchField().id == MatchField.TUNNEL_ID.id) {
        throw new OfError(
            OFBadMatchCode.BAD_FIELD,
            what(r)
                + "matches tunnel_id, which carries the virtual in_port of a handed-off packet");
      }
    }
    int gotoT = -1;
    boolean writesSet = false;
    boolean writesMeta = false;
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionGotoTable g) {
        gotoT = g.getTableId().getValue();
      } else if (i instanceof OFInstructionWriteActions w) {
        writesSet = !w.getActions().isEmpty();
        checkNoTunnelSet(r, w.getActions());
      } else if (i instanceof OFInstructionWriteMetadata) {
        writesMeta = true;
      } else if (i instanceof OFInstructionApplyActions a) {
        checkNoTunnelSet(r, a.getActions());
      }
    }
    boolean matchesMeta =
        MatchUtil.oxms(r.match()).stream()
            .anyMatch(o -> o.getMatchField().id == MatchField.METADATA.id);
    for (var e : off.locations().entrySet()) {
      int lt = e.getKey();
      String where = "table " + lt + " runs on " + e.getValue() + ": ";
      if (r.table() < lt && gotoT >= 0 && gotoT <= lt) {
        if (writesSet) {
          throw new OfError(
              OFBadActionCode.UNSUPPORTED_ORDER,
              where
                  + what(r)
                  + "writes an action set and may reach it: a handoff cannot carry the action set");
        }
        if (writesMeta && meta.matchedFrom(lt)) {
          throw new OfError(
              OFBadActionCode.UNSUPPORTED_ORDER,
              where
                  + what(r)
                  + "writes metadata that a rule at or after table "
                  + lt
                  + " matches: a handoff cannot carry metadata");
        }
      }
      if (r.table() >= lt && matchesMeta && meta.writtenBefore(lt)) {
        throw new OfError(
            OFBadActionCode.UNSUPPORTED_ORDER,
            where
                + what(r)
                + "matches metadata written before table "
                + lt
                + ": a handoff cannot carry metadata");
      }
    }
  }

  private static void checkNoTunnelSet(VirtualRule r, List<OFAction> acts) throws OfError {
    for (OFAction a : acts) {
      if (a instanceof OFActionSetField s
          && s.getField().getMatchField().id == MatchField.TUNNEL_ID.id) {
        throw new OfError(
            OFBadActionCode.BAD_SET_TYPE,
            what(r) + "sets tunnel_id, which carries the virtual in_port of a handed-off packet");
      }
    }
  }

  static String what(VirtualRule r) {
    return "rule table=" + r.table() + " priority=" + r.priority() + " " + r.match() + " ";
  }

  // ------------------------------------------------------------------ where

  /** The switches that hold table {@code table}'s rules. */
  private List<String> runs(int table) {
    Optional<String> at = off.at(table);
    if (at.isPresent()) {
      return List.of(at.get());
    }
    List<String> local = t.ingressSwitches();
    List<String> out = new ArrayList<>();
    for (String sw : topo.switches()) {
      if (local.contains(sw) || receives(sw, table)) {
        out.add(sw);
      }
    }
    return out;
  }

  /** True if {@code sw} is the host and {@code r} is in the high part of a split table. */
  private boolean hostPart(VirtualRule r, String sw) {
    return sw.equals(topo.host()) && off.hostPart(r.table(), r.priority());
  }

  /** True if {@code sw} runs handed-off packets at table {@code table}. */
  private boolean receives(String sw, int table) {
    return off.receivesAt(sw) <= table;
  }

  /**
   * The virtual in_ports whose packets may be handed off to {@code sw}: every vport with a port
   * elsewhere (and CONTROLLER for a packet-out's pipeline run elsewhere); every vport if a packet
   * of {@code sw} may leave and come back: by a table located elsewhere before one located here,
   * or, on an sNIC, relayed back by the host after a move from another sNIC (a packet this sNIC
   * handed off before the move, which the host re-points to it while that packet is on the way).
   */
  private Set<Integer> sources(String sw) {
    Set<Integer> out = new LinkedHashSet<>();
    boolean all = off.bounces(sw) || !sw.equals(topo.host());
    for (VPort v : ports.all()) {
      if (all || v.instances().stream().anyMatch(l -> !l.sw().equals(sw))) {
        out.add(v.vport());
      }
    }
    for (Drain d : ports.drains()) {
      if (all || !d.loc().sw().equals(sw)) {
        out.add(d.vport());
      }
    }
    Optional<String> ctl = t.controllerSwitch();
    if (ctl.isPresent() && (all || !ctl.get().equals(sw))) {
      out.add(OFPort.CONTROLLER.getPortNumber());
    }
    return out;
  }

  private List<VPort.Loc> ingress(int vport) {
    List<VPort.Loc> out = new ArrayList<>(ports.get(vport).orElseThrow().instances());
    ports.drainsOf(vport).forEach(d -> out.add(d.loc()));
    return out;
  }

  private static Translator.Ingress handed(int vport) {
    return new Translator.Ingress(vport, Translator.Ingress.HANDED);
  }

  /**
   * True if what {@code r} does depends on the packet's in_port: an output (other than to the
   * controller) or a group, in its apply-actions or its action set.
   */
  static boolean dependsOnInPort(VirtualRule r) {
    for (OFInstruction i : r.instructions()) {
      List<OFAction> acts =
          i instanceof OFInstructionApplyActions a
              ? a.getActions()
              : i instanceof OFInstructionWriteActions w ? w.getActions() : List.of();
      for (OFAction a : acts) {
        if (a instanceof OFActionGroup
            || a instanceof OFActionOutput o && !o.getPort().equals(OFPort.CONTROLLER)) {
          return true;
        }
      }
    }
    return false;
  }

  static Match inPortMatch(OFPort p) {
    return F.buildMatch().setExact(MatchField.IN_PORT, p).build();
  }

  private static boolean isTunnel(Match m) {
    return MatchUtil.oxms(m).stream()
        .anyMatch(o -> o.getMatchField().id == MatchField.TUNNEL_ID.id);
  }

  /** {@code m} plus {@code tunnel_id=code}. */
  static Match withTunnel(Match m, long code) {
    List<OFOxm<?>> out = new ArrayList<>(MatchUtil.oxms(m));
    out.add(F.oxms().tunnelId(U64.of(code)));
    return MatchUtil.of(out);
  }
}
