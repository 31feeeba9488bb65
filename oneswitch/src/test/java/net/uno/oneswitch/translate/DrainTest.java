package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.TOPO;
import static net.uno.oneswitch.translate.Fixtures.apply;
import static net.uno.oneswitch.translate.Fixtures.out;
import static net.uno.oneswitch.translate.Fixtures.rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VPort.Loc;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketInReason;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * A port that left a vport stays an ingress-only (draining) port of it for a window: V4 (vm1) moved
 * from host:101 to snic0:7, host:101 draining.
 */
class DrainTest {
  private final TagAllocator tags = TagAllocator.vlan();
  private static final Loc OLD = new Loc("host", 101);

  private static PortMap moved() {
    return PORTS.with(new VPort(4, "snic0", 7, "vm1")).withDrains(List.of(new Drain(4, OLD, 5000)));
  }

  private Translator t(PortMap pm) {
    return new Translator(TOPO, pm, 252, tags::acquire, g -> false, Map.of());
  }

  private static Match inPort(int v) {
    return F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(v)).build();
  }

  private static List<OFAction> actions(PhysRule p) {
    return ((OFInstructionApplyActions) p.instructions().get(0)).getActions();
  }

  private int tag(int vport) {
    return tags.tagOf(Translator.tagKey(vport, 0)).getAsInt();
  }

  @Test
  void aDrainingPortGetsTheInPortReplicaAndDispatchButNoOutput() throws OfError {
    Translator tr = t(moved());
    // in_port=4 -> output:2 (vm0 on the host): one replica per ingress port of V4.
    List<PhysRule> ps = tr.rule(rule(0, 10, inPort(4), apply(out(2))));
    assertEquals(2, ps.size());
    assertEquals("snic0", ps.get(0).sw());
    assertEquals(OFPort.of(7), ps.get(0).match().get(MatchField.IN_PORT));
    assertEquals("host", ps.get(1).sw());
    assertEquals(OFPort.of(101), ps.get(1).match().get(MatchField.IN_PORT), "the draining port");
    assertEquals(List.of(out(100)), actions(ps.get(1)), "forwarded as in_port=4 always was");
    // Output to V4 from another port goes to the new place only (never to the draining port).
    List<PhysRule> to = tr.rule(rule(0, 10, inPort(2), apply(out(4))));
    assertEquals(1, to.size());
    assertEquals(
        List.of(
            F.actions().pushVlan(EthType.VLAN_FRAME),
            F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tag(4)))),
            out(1),
            F.actions().popVlan()),
        actions(to.get(0)));
    // Output back to V4 (and FLOOD) in the draining port's replica is output to its in_port:
    // the switch drops it, as the virtual switch drops output to in_port.
    List<PhysRule> hairpin = tr.rule(rule(0, 10, inPort(4), apply(out(4))));
    assertEquals(List.of(out(101)), actions(hairpin.get(1)));
    assertEquals(List.of(out(7)), actions(hairpin.get(0)));
    List<PhysRule> flood =
        tr.rule(rule(0, 10, inPort(4), apply(out(OFPort.FLOOD.getPortNumber()))));
    assertTrue(actions(flood.get(1)).contains(out(101)), "V4 itself: the dropped in_port output");
    assertTrue(actions(flood.get(1)).stream().noneMatch(a -> a.equals(out(7))));
    // Dispatch: the draining port still enters the pipeline; the only rule that sends to it is the
    // host's for V4's tag from snic0's link (V4's new switch): a frame tagged before the remap.
    List<PhysRule> d = tr.dispatch(tags.live());
    assertTrue(
        d.stream()
            .anyMatch(
                p ->
                    p.sw().equals("host")
                        && p.table() == 0
                        && OFPort.of(101).equals(p.match().get(MatchField.IN_PORT))
                        && p.match().get(MatchField.VLAN_VID) == null));
    List<PhysRule> toOld =
        d.stream().filter(p -> p.instructions().toString().contains("port=101,")).toList();
    assertEquals(1, toOld.size(), toOld.toString());
    assertEquals("host", toOld.get(0).sw());
    assertEquals(OFPort.of(1), toOld.get(0).match().get(MatchField.IN_PORT), "snic0's link");
    assertEquals(
        OFVlanVidMatch.ofVlan(tag(4)), toOld.get(0).match().get(MatchField.VLAN_VID), "V4's tag");
  }

  @Test
  void packetInFromTheDrainingPortIsTheVport() {
    OFPacketIn pin =
        F.buildPacketIn()
            .setBufferId(OFBufferId.NO_BUFFER)
            .setReason(OFPacketInReason.ACTION)
            .setTableId(TableId.of(1))
            .setCookie(U64.of(9))
            .setMatch(inPort(101))
            .setData(new byte[60])
            .build();
    assertEquals(
        OFPort.of(4),
        t(moved())
            .packetIn("host", pin, U64.of(5))
            .orElseThrow()
            .getMatch()
            .get(MatchField.IN_PORT));
    assertTrue(
        t(PORTS.with(new VPort(4, "snic0", 7, "vm1"))).packetIn("host", pin, U64.of(5)).isEmpty(),
        "without the drain the port is unmapped");
  }

  @Test
  void aSwitchWithOnlyADrainingPortRunsTheWildcardReplica() throws OfError {
    // V3 (eth1 on snic1) moved to the host; snic1 keeps only the draining port.
    PortMap pm =
        PORTS
            .with(new VPort(3, "host", 300, "eth1"))
            .withDrains(List.of(new Drain(3, new Loc("snic1", 1), 5000)));
    Translator tr = t(pm);
    assertTrue(tr.ingressSwitches().contains("snic1"));
    List<PhysRule> ps = tr.rule(rule(0, 5, F.buildMatch().build(), apply(out(2))));
    assertTrue(ps.stream().anyMatch(p -> p.sw().equals("snic1")));
    assertTrue(!t(pm.withoutDrainsUntil(5000)).ingressSwitches().contains("snic1"), "expired");
  }

  @Test
  void mappingTheDrainingPortEndsTheDrain() {
    PortMap pm = moved();
    assertEquals(1, pm.drainsOf(4).size());
    assertTrue(pm.with(new VPort(9, "host", 101, "x")).drains().isEmpty(), "another vport");
    assertTrue(pm.with(new VPort(4, "host", 101, "vm1")).drains().isEmpty(), "moved back");
    assertTrue(pm.without(4).drains().isEmpty(), "unmapped vport: no drain");
    assertEquals(pm.drains(), pm.withoutDrainsUntil(4999).drains());
    assertTrue(pm.withoutDrainsUntil(5000).drains().isEmpty());
    assertEquals(4, pm.byIngress("host", 101).orElseThrow().vport());
    assertTrue(pm.byPhysical("host", 101).isEmpty(), "not an instance: free to map");
  }
}
