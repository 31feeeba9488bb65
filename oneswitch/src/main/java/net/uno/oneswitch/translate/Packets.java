package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketOut;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * PACKET_OUT and PACKET_IN between the virtual switch and the physical ones (docs/translation.md):
 * a packet-out runs on the switch of its in_port (or of its first mapped output), its actions
 * translated there; a packet-in comes back with its vport, virtual table and the virtual rule's
 * cookie. Pure: returns the new message.
 */
final class Packets {
  private static final OFFactory F = MatchUtil.F;

  private Packets() {}

  /** Maps a virtual PACKET_OUT onto the physical switch that executes it. */
  static Translator.PhysPacketOut out(Translator t, OFPacketOut po) throws OfError {
    PortMap ports = t.ports();
    if (!po.getBufferId().equals(OFBufferId.NO_BUFFER)) {
      throw new OfError(OFBadRequestCode.BUFFER_UNKNOWN, "OneSwitch buffers no packets");
    }
    OFPort in = po.getInPort();
    String sw;
    OFPort physIn;
    if (in.equals(OFPort.CONTROLLER) || in.equals(OFPort.ANY)) {
      sw = firstOutputSwitch(t, po.getActions());
      physIn = OFPort.CONTROLLER;
      for (OFAction a : po.getActions()) {
        if (a instanceof OFActionOutput o && o.getPort().equals(OFPort.TABLE)) {
          // The pipeline runs where table 0 sends in_port=CONTROLLER to table 1.
          sw =
              t.controllerSwitch()
                  .orElseThrow(
                      () ->
                          new OfError(
                              OFBadActionCode.BAD_OUT_PORT, "output:TABLE: no port is mapped"));
        }
      }
    } else if (Translator.isStandard(in)) {
      Optional<VPort> v = ports.get(in.getPortNumber());
      if (v.isEmpty()) {
        throw new OfError(OFBadRequestCode.BAD_PORT, "in_port " + in + " is not mapped");
      }
      sw = v.get().sw(); // a scaled-out vport: its first instance
      physIn = OFPort.of(v.get().port());
    } else {
      throw new OfError(OFBadRequestCode.BAD_PORT, "in_port " + in);
    }
    Translator.Ingress ing =
        physIn.equals(OFPort.CONTROLLER)
            ? Translator.Ingress.NONE
            : new Translator.Ingress(in.getPortNumber(), physIn.getPortNumber());
    List<OFAction> acts = new ArrayList<>();
    for (OFAction a : po.getActions()) {
      if (a instanceof OFActionOutput o && o.getPort().equals(OFPort.TABLE)) {
        acts.add(a); // runs the replicated pipeline from table 0 (dispatch) on this switch
      } else {
        acts.addAll(t.actions(List.of(a), sw, false, ing));
      }
    }
    OFPacketOut msg =
        F.buildPacketOut()
            .setBufferId(OFBufferId.NO_BUFFER)
            .setInPort(physIn)
            .setActions(acts)
            .setData(po.getData())
            .build();
    return new Translator.PhysPacketOut(sw, msg);
  }

  private static String firstOutputSwitch(Translator t, List<OFAction> acts) {
    PortMap ports = t.ports();
    for (OFAction a : acts) {
      if (a instanceof OFActionOutput o && Translator.isStandard(o.getPort())) {
        Optional<VPort> v = ports.get(o.getPort().getPortNumber());
        if (v.isPresent()) {
          return v.get().sw();
        }
      }
    }
    return t.topo().host();
  }

  /** {@code m} without tunnel_id (OneSwitch's handoff field, never the controller's). */
  private static Match withoutTunnel(Match m) {
    if (!m.isExact(MatchField.TUNNEL_ID) && !m.isPartiallyMasked(MatchField.TUNNEL_ID)) {
      return m;
    }
    List<org.projectfloodlight.openflow.protocol.oxm.OFOxm<?>> out = new ArrayList<>();
    for (var o : MatchUtil.oxms(m)) {
      if (o.getMatchField().id != MatchField.TUNNEL_ID.id) {
        out.add(o);
      }
    }
    return MatchUtil.of(out);
  }

  /**
   * Maps a physical PACKET_IN back to the virtual switch: physical in_port to its vport, physical
   * table t to virtual t-1, cookie via {@code virtualCookie}. Empty if it does not belong to the
   * virtual switch (unmapped port, dispatch table).
   */
  static Optional<OFPacketIn> in(
      Topology topo, PortMap ports, String sw, OFPacketIn pin, U64 virtualCookie) {
    Optional<OFPort> in = MatchUtil.inPort(pin.getMatch());
    if (in.isEmpty() || pin.getTableId().getValue() < 1) {
      return Optional.empty();
    }
    Match pm = pin.getMatch();
    long tunnel = pm.isExact(MatchField.TUNNEL_ID) ? pm.get(MatchField.TUNNEL_ID).getValue() : 0;
    OFPort vin;
    if (tunnel != 0) {
      // Handed off from another switch (Offload): tunnel_id names the virtual in_port.
      Optional<OFPort> h = Offload.vportOfCode(tunnel);
      if (h.isEmpty() || !topo.isPciePort(sw, in.get().getPortNumber())) {
        return Optional.empty();
      }
      vin = h.get();
    } else {
      Optional<VPort> v = ports.byIngress(sw, in.get().getPortNumber());
      if (v.isEmpty()) {
        return Optional.empty();
      }
      vin = OFPort.of(v.get().vport());
    }
    Match m = MatchUtil.withInPort(withoutTunnel(pm), vin);
    return Optional.of(
        F.buildPacketIn()
            .setXid(0)
            .setBufferId(OFBufferId.NO_BUFFER)
            .setTotalLen(pin.getTotalLen())
            .setReason(pin.getReason())
            .setTableId(TableId.of(pin.getTableId().getValue() - 1))
            .setCookie(virtualCookie)
            .setMatch(m)
            .setData(pin.getData())
            .build());
  }
}
