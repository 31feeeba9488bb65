package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * Physical table 0 of every switch, reserved for dispatch (docs/translation.md): drop by default
 * (on a shared switch, an operator's, only what comes in from its PCIe port), each mapped, draining
 * or prepared port (and CONTROLLER on the switch that runs packet-outs' pipelines) to the pipeline,
 * and each live flow-id tag or label from each PCIe port delivered to its vport or sent on toward
 * it. Pure.
 */
final class Dispatch {
  private static final OFFactory F = MatchUtil.F;

  private final Topology topo;
  private final PortMap ports;
  private final Optional<String> controllerSwitch;
  private final Offload off;

  private Dispatch(Topology topo, PortMap ports, Optional<String> controllerSwitch, Offload off) {
    this.topo = topo;
    this.ports = ports;
    this.controllerSwitch = controllerSwitch;
    this.off = off;
  }

  /**
   * The table-0 rules of every switch of {@code topo} for {@code ports} and the live tags; {@code
   * controllerSwitch}: where a packet-out from CONTROLLER runs the pipeline (if any port is
   * mapped).
   */
  static List<PhysRule> rules(
      Topology topo,
      PortMap ports,
      Optional<String> controllerSwitch,
      Map<Long, Integer> liveTags,
      Offload off) {
    return new Dispatch(topo, ports, controllerSwitch, off).rules(liveTags);
  }

  /** The rules of every switch's table 0 for the live tags {@code liveTags} (key -> tag). */
  private List<PhysRule> rules(Map<Long, Integer> liveTags) {
    List<PhysRule> out = new ArrayList<>();
    for (String s : topo.switches()) {
      if (!topo.isShared(s)) {
        out.add(new PhysRule(s, Translator.DISPATCH_TABLE, 0, MatchUtil.of(List.of()), List.of()));
        continue;
      }
      // An operator's switch: its other ports and its own table-0 defaults (a priority-0
      // catch-all such as NORMAL, which a catch-all ADD of OneSwitch's would replace) stay its
      // own; only what comes in from the PCIe side (OneSwitch's link) is dropped by default.
      for (int p : topo.pciePorts(s)) {
        Match m = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(p)).build();
        out.add(new PhysRule(s, Translator.DISPATCH_TABLE, 0, m, List.of()));
      }
    }
    // While a vport is scaled out, what enters by a mapped port gets the symmetric flow hash the
    // scale groups select by (SymmetricHash); without one the datapath flows stay wildcarded.
    List<OFInstruction> toPipeline =
        ports.all().stream().anyMatch(v -> v.k() > 1)
            ? List.of(
                F.instructions().applyActions(List.of(SymmetricHash.ACTION)),
                F.instructions().gotoTable(TableId.of(1)))
            : List.of(F.instructions().gotoTable(TableId.of(1)));
    for (VPort v : ports.all()) {
      for (VPort.Loc l : v.instances()) {
        Match m = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(l.port())).build();
        out.add(
            new PhysRule(l.sw(), Translator.DISPATCH_TABLE, Translator.PRIO_PORT, m, toPipeline));
      }
    }
    for (Drain d : ports.drains()) {
      Match m = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(d.loc().port())).build();
      out.add(
          new PhysRule(
              d.loc().sw(), Translator.DISPATCH_TABLE, Translator.PRIO_PORT, m, toPipeline));
    }
    controllerSwitch.ifPresent(
        sw ->
            out.add(
                new PhysRule(
                    sw,
                    Translator.DISPATCH_TABLE,
                    Translator.PRIO_PORT,
                    F.buildMatch().setExact(MatchField.IN_PORT, OFPort.CONTROLLER).build(),
                    List.of(F.instructions().gotoTable(TableId.of(1))))));
    // Every switch routes every live tag from every PCIe port: delivered where the vport is, else
    // sent on toward it (back out of the port it came in by when that is the way). After a remap,
    // a frame still crossing PCIe under the old map (in a shaped link's queue, say) is forwarded
    // to the vport's new place instead of dropped: the break phase re-points these rules, never
    // deletes them while the tag is live.
    OFAction back = F.actions().output(OFPort.IN_PORT, 0xffff);
    // Each instance of a scaled-out vport has its own tag (slot); a slot beyond the current
    // instances (kept live a moment after a shrink, for frames in flight) goes to the port that
    // held it while that one drains (removedSlotPort), else to slot mod k.
    for (Map.Entry<Long, Integer> e : liveTags.entrySet()) {
      if (Offload.isHandoff(e.getKey())) {
        handoff(e.getKey(), e.getValue(), out);
        continue;
      }
      Optional<VPort> ov = ports.get(Translator.tagVport(e.getKey()));
      if (ov.isEmpty()) {
        continue;
      }
      int slot = Translator.tagSlot(e.getKey());
      VPort.Loc v =
          removedSlotPort(ov.get(), slot).orElse(ov.get().instances().get(slot % ov.get().k()));
      long key = e.getKey();
      int tag = e.getValue();
      List<OFAction> deliver = Carrier.deliver(key, v.port());
      boolean onHost = v.sw().equals(topo.host());
      Optional<VPort.Loc> left = leftPort(ov.get(), Translator.tagSlot(key));
      for (Topology.Pcie l : topo.pcie().values()) {
        List<OFAction> atHost;
        if (onHost) {
          atHost = deliver;
        } else if (l.snic().equals(v.sw())) {
          atHost = toLeftPort(left, topo.host(), key).orElse(List.of(back));
        } else {
          atHost =
              List.of(F.actions().output(OFPort.of(topo.pcie().get(v.sw()).hostPort()), 0xffff));
        }
        out.add(tagRule(topo.host(), l.hostPort(), key, tag, atHost));
        out.add(
            tagRule(
                l.snic(),
                l.snicPort(),
                key,
                tag,
                l.snic().equals(v.sw())
                    ? deliver
                    : toLeftPort(left, l.snic(), key).orElse(List.of(back))));
      }
    }
    return out;
  }

  /**
   * The dispatch rules of handoff tag {@code tag} ({@link Offload}): where its table is located,
   * the carrier is popped, {@code tunnel_id} names the virtual in_port and the pipeline goes on at
   * the table; elsewhere it is sent on toward that switch (the host) or back (an sNIC). A tag whose
   * table is no longer located anywhere (it lingers after a move back) has no rule: dropped.
   */
  private void handoff(long key, int tag, List<PhysRule> out) {
    int t = Offload.handoffTable(key);
    Optional<String> at = off.at(t);
    if (at.isEmpty()) {
      return;
    }
    String to = at.get();
    List<OFInstruction> deliver =
        List.of(
            F.instructions()
                .applyActions(
                    List.of(
                        Carrier.undo(key),
                        F.actions()
                            .setField(
                                F.oxms()
                                    .tunnelId(U64.of(Offload.code(Offload.handoffVport(key))))))),
            F.instructions().gotoTable(TableId.of(t + 1)));
    List<OFInstruction> back =
        List.of(F.instructions().applyActions(List.of(F.actions().output(OFPort.IN_PORT, 0xffff))));
    for (Topology.Pcie l : topo.pcie().values()) {
      List<OFInstruction> atHost;
      if (to.equals(topo.host())) {
        atHost = deliver;
      } else if (l.snic().equals(to)) {
        atHost = back;
      } else {
        atHost =
            List.of(
                F.instructions()
                    .applyActions(
                        List.of(
                            F.actions()
                                .output(OFPort.of(topo.pcie().get(to).hostPort()), 0xffff))));
      }
      out.add(rule(topo.host(), l.hostPort(), key, tag, atHost));
      out.add(rule(l.snic(), l.snicPort(), key, tag, l.snic().equals(to) ? deliver : back));
    }
  }

  private static PhysRule rule(String sw, int inPort, long key, int tag, List<OFInstruction> ins) {
    return new PhysRule(
        sw,
        Translator.DISPATCH_TABLE,
        Carrier.priority(key),
        Carrier.tagMatch(key, inPort, tag),
        ins);
  }

  /**
   * The port a single-instance vport {@code vp} left by a remap and that still drains, on another
   * switch than its new one (empty otherwise, or when unclear: several such ports, a scaled-out
   * vport, a slot other than 0). A frame tagged for {@code vp} before the remap may still be on its
   * way to that switch; there, one coming in from the PCIe side of the vport's new switch can only
   * be such a frame (the new switch delivers the vport's frames itself, and the host reaches an
   * sNIC only through that sNIC's own link). Delivered to the leaving instance, which still runs
   * and forwards it before its drain answers, it keeps its order; sent back to the new place it
   * would arrive there after frames sent later (an order-preserving move would reorder).
   */
  private Optional<VPort.Loc> leftPort(VPort vp, int slot) {
    if (vp.k() != 1 || slot != 0) {
      return Optional.empty();
    }
    String now = vp.instances().get(0).sw();
    List<VPort.Loc> left =
        ports.drainsOf(vp.vport()).stream()
            .filter(d -> !d.prepared() && !d.loc().sw().equals(now))
            .map(Drain::loc)
            .toList();
    return left.size() == 1 ? Optional.of(left.get(0)) : Optional.empty();
  }

  /**
   * The leaving port that held slot {@code slot} of scaled-out vport {@code vp} when a shrink took
   * it out and that still drains (empty for a slot the vport still has, or when none does). A frame
   * tagged for that slot before the shrink (on the PCIe link, or sent by a datapath still on its
   * cached megaflows of the old select buckets) belongs to a flow whose earlier frames that
   * instance has; delivered to it, it is forwarded before the instance's drain answers, so the
   * instances that took its flows over (held until then) cannot send the flow's later frames first.
   * Sent to slot mod k instead, it reached an instance after the flow's later frames (reordering at
   * every scale-in under load).
   */
  private Optional<VPort.Loc> removedSlotPort(VPort vp, int slot) {
    if (slot < vp.k()) {
      return Optional.empty();
    }
    return ports.drainsOf(vp.vport()).stream()
        .filter(d -> !d.prepared() && d.slot() == slot)
        .map(Drain::loc)
        .findFirst();
  }

  /** Delivery to the left port {@code left} when it is on switch {@code sw} (see leftPort). */
  private static Optional<List<OFAction>> toLeftPort(
      Optional<VPort.Loc> left, String sw, long key) {
    return left.filter(l -> l.sw().equals(sw)).map(l -> Carrier.deliver(key, l.port()));
  }

  private static PhysRule tagRule(String sw, int inPort, long key, int tag, List<OFAction> acts) {
    return new PhysRule(
        sw,
        Translator.DISPATCH_TABLE,
        Carrier.priority(key),
        Carrier.tagMatch(key, inPort, tag),
        List.of(F.instructions().applyActions(acts)));
  }
}
