package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.TOPO;
import static net.uno.oneswitch.translate.Fixtures.assertOfError;
import static net.uno.oneswitch.translate.Fixtures.out;
import static net.uno.oneswitch.translate.Fixtures.rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;

/** write_actions outputs through carrier groups (the paper's table X case). */
class WriteActionSetTest {
  private final TagAllocator tags = TagAllocator.vlan();
  private final Translator t = Fixtures.translator(tags, PORTS);

  private static Match inPort(int v) {
    return F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(v)).build();
  }

  private static List<OFInstruction> write(OFAction... a) {
    return List.of(F.instructions().writeActions(List.of(a)));
  }

  private static List<OFAction> set(PhysRule p) {
    return ((OFInstructionWriteActions) p.instructions().get(0)).getActions();
  }

  private static OFAction group(int g) {
    return F.actions().group(OFGroup.of(g));
  }

  private static int carrier(int vport) {
    return WriteActionSet.CARRIER_GROUP_BASE + vport;
  }

  private Optional<Map.Entry<OFGroupType, List<OFBucket>>> carrierOn(
      PortMap pm, int id, String sw) {
    return WriteActionSet.carrier(TOPO, pm, Map.of(), id, sw, k -> tags.tagOf(k));
  }

  private static List<OFAction> bucket(Map.Entry<OFGroupType, List<OFBucket>> g, int i) {
    return g.getValue().get(i).getActions();
  }

  private static List<OFAction> tagged(int tag, int pcie) {
    return List.of(
        F.actions().pushVlan(EthType.VLAN_FRAME),
        F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tag))),
        out(pcie));
  }

  @Test
  void localOutputUsesTheCarrierWithALocalBucket() throws OfError {
    PhysRule p = t.rule(rule(0, 1, inPort(2), write(out(4)))).get(0);
    assertEquals("host", p.sw());
    assertEquals(List.of(group(carrier(4))), set(p));
    assertTrue(tags.live().isEmpty(), "a local carrier needs no tag");
    var g = carrierOn(PORTS, carrier(4), "host").orElseThrow();
    assertEquals(OFGroupType.INDIRECT, g.getKey());
    assertEquals(List.of(out(101)), bucket(g, 0));
  }

  @Test
  void remoteOutputTagsInTheCarrierBucketAndKeepsTheSetsOwnActions() throws OfError {
    OFAction push = F.actions().pushVlan(EthType.VLAN_FRAME);
    OFAction vid = F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(5)));
    // Untagged (matched exactly): one header after the set's push, the VLAN carrier fits.
    Match untagged =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.UNTAGGED)
            .build();
    PhysRule p = t.rule(rule(0, 1, untagged, write(push, vid, out(1)))).get(0);
    // The set's own push/set_field run before the group: the carrier tag ends outermost.
    assertEquals(List.of(push, vid, group(carrier(1))), set(p));
    int tag = tags.tagOf(1).getAsInt();
    assertEquals(tagged(tag, 1), bucket(carrierOn(PORTS, carrier(1), "host").orElseThrow(), 0));
    // snic1 -> snic0 goes through the host: its carrier outputs to snic1's PCIe port 100.
    t.rule(rule(0, 1, inPort(3), write(out(1))));
    assertEquals(tagged(tag, 100), bucket(carrierOn(PORTS, carrier(1), "snic1").orElseThrow(), 0));
  }

  @Test
  void remapRepointsOnlyTheCarrierNotTheRule() throws OfError {
    VirtualRule r = rule(0, 1, inPort(2), write(out(1)));
    PhysRule before = t.rule(r).get(0);
    PortMap moved =
        new PortMap(
            List.of(
                new VPort(1, "host", 7, "eth0"),
                new VPort(2, "host", 100, "vm0"),
                new VPort(3, "snic1", 1, "eth1"),
                new VPort(4, "host", 101, "vm1")));
    PhysRule after = Fixtures.translator(tags, moved).rule(r).get(0);
    assertEquals(before, after, "the physical rule is unchanged by the remap");
    assertEquals(List.of(out(7)), bucket(carrierOn(moved, carrier(1), "host").orElseThrow(), 0));
  }

  @Test
  void outputBackToInPortIsTheDroppedPhysicalOutput() throws OfError {
    PhysRule p = t.rule(rule(0, 1, inPort(2), write(out(2)))).get(0);
    assertEquals(List.of(out(100)), set(p));
  }

  @Test
  void groupAndLaterOutputsTakePrecedenceWithinOneSet() throws OfError {
    PhysRule p = t.rule(rule(0, 1, inPort(2), write(out(1), group(7)))).get(0);
    assertEquals(List.of(group(7)), set(p), "a group in the set wins: the output never runs");
    OFAction ctlIgnored = F.actions().output(OFPort.CONTROLLER, 64);
    assertEquals(
        List.of(ctlIgnored, group(7)),
        set(t.rule(rule(0, 1, inPort(2), write(ctlIgnored, group(7)))).get(0)),
        "a reserved output passes through (the switch ignores it the same way)");
    assertTrue(tags.live().isEmpty(), "no tag for an output that never runs");
    OFAction ctl = F.actions().output(OFPort.CONTROLLER, 64);
    assertEquals(
        List.of(ctl, group(carrier(4))),
        set(t.rule(rule(0, 1, inPort(2), write(ctl, out(4)))).get(0)));
    assertEquals(List.of(ctl), set(t.rule(rule(0, 1, inPort(2), write(out(4), ctl))).get(0)));
  }

  @Test
  void floodIsTheAllCarrierOverEveryMappedVport() throws OfError {
    PhysRule p = t.rule(rule(0, 1, inPort(2), write(F.actions().output(OFPort.FLOOD, 0)))).get(0);
    assertEquals(List.of(group(WriteActionSet.FLOOD_CARRIER)), set(p));
    var g = carrierOn(PORTS, WriteActionSet.FLOOD_CARRIER, "host").orElseThrow();
    assertEquals(OFGroupType.ALL, g.getKey());
    assertEquals(4, g.getValue().size());
    assertEquals(tagged(tags.tagOf(1).getAsInt(), 1), bucket(g, 0));
    assertEquals(List.of(out(100)), bucket(g, 1), "in_port's own bucket: the switch skips it");
    assertEquals(tagged(tags.tagOf(3).getAsInt(), 2), bucket(g, 2));
    assertEquals(List.of(out(101)), bucket(g, 3));
  }

  @Test
  void scaledVportIsReachedByItsSelectGroup() throws OfError {
    PortMap pm =
        new PortMap(
            List.of(
                new VPort(1, "snic0", 1, "eth0"),
                new VPort(2, "host", 100, "vm0"),
                VPort.of(
                    4, "vm1", List.of(new VPort.Loc("host", 101), new VPort.Loc("snic0", 9)))));
    int sg = Translator.SCALE_GROUP_BASE;
    Translator ts = new Translator(TOPO, pm, 252, tags::acquire, g -> g == 7, Map.of(4, sg));
    assertEquals(List.of(group(sg)), set(ts.rule(rule(0, 1, inPort(2), write(out(4)))).get(0)));
    assertOfError(
        "BadAction/BAD_OUT_PORT", () -> ts.rule(rule(0, 1, F.buildMatch().build(), write(out(4)))));
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER",
        () -> ts.rule(rule(0, 1, inPort(4), write(F.actions().output(OFPort.ALL, 0)))));
    var g =
        WriteActionSet.carrier(
                TOPO, pm, Map.of(4, sg), WriteActionSet.FLOOD_CARRIER, "host", k -> tags.tagOf(k))
            .orElseThrow();
    assertEquals(List.of(group(sg)), bucket(g, 2));
  }

  @Test
  void refusals() {
    assertOfError(
        "BadAction/BAD_OUT_PORT", () -> t.rule(rule(0, 1, inPort(2), write(out(0x10000)))));
    // match vlan + the set's push_vlan = 2 headers: the carrier tag would be a third.
    Match vlan =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(3))
            .build();
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER",
        () -> t.rule(rule(0, 1, vlan, write(F.actions().pushVlan(EthType.VLAN_FRAME), out(1)))));
    assertOfError(
        "BadAction/BAD_OUT_PORT",
        () -> t.rule(rule(0, 1, inPort(2), write(F.actions().output(OFPort.LOCAL, 0)))));
  }

  @Test
  void carrierIdsAreReservedAndFoundInPhysicalRules() throws OfError {
    assertTrue(WriteActionSet.isCarrierGroup(carrier(1)));
    assertTrue(WriteActionSet.isCarrierGroup(WriteActionSet.FLOOD_CARRIER));
    assertTrue(!WriteActionSet.isCarrierGroup(7));
    assertTrue(!WriteActionSet.isCarrierGroup(Translator.SCALE_GROUP_BASE));
    PhysRule p = t.rule(rule(0, 1, inPort(2), write(out(1)))).get(0);
    assertEquals(java.util.Set.of(carrier(1)), WriteActionSet.carriersOf(p));
    // An unmapped vport's carrier drops, and still replaces what an earlier table wrote.
    PhysRule u = t.rule(rule(0, 1, inPort(2), write(out(9)))).get(0);
    assertEquals(List.of(group(carrier(9))), set(u));
    var drop = carrierOn(PORTS, carrier(9), "host").orElseThrow();
    assertEquals(OFGroupType.INDIRECT, drop.getKey());
    assertEquals(List.of(), bucket(drop, 0));
  }

  @Test
  void actionSetOrderAcrossTables() throws OfError {
    VirtualRule g0 = rule(0, 1, inPort(2), write(group(7)));
    VirtualRule out1 = rule(1, 1, inPort(2), write(out(1)));
    VirtualRule ctl2 = rule(2, 1, inPort(2), write(F.actions().output(OFPort.CONTROLLER, 64)));
    assertOfError("BadAction/UNSUPPORTED_ORDER", () -> ActionSetOrder.check(out1, List.of(g0)));
    assertOfError("BadAction/UNSUPPORTED_ORDER", () -> ActionSetOrder.check(g0, List.of(out1)));
    assertOfError("BadAction/UNSUPPORTED_ORDER", () -> ActionSetOrder.check(ctl2, List.of(out1)));
    // Faithful orders: a later group or vport output replaces the earlier; a later
    // clear_actions empties the set first; a reserved output before a vport output.
    ActionSetOrder.check(rule(3, 1, inPort(2), write(group(7))), List.of(out1));
    ActionSetOrder.check(out1, List.of(rule(0, 1, inPort(2), write(out(3)))));
    ActionSetOrder.check(
        rule(
            1,
            1,
            inPort(2),
            List.of(
                F.instructions().clearActions(), F.instructions().writeActions(List.of(out(1))))),
        List.of(g0));
    ActionSetOrder.check(
        out1, List.of(rule(0, 1, inPort(2), write(F.actions().output(OFPort.CONTROLLER, 64)))));
    ActionSetOrder.check(out1, List.of(rule(1, 1, inPort(4), write(group(7)))));
    // The core's incremental counts: a conflict lasts exactly while both rules are installed.
    ActionSetOrder idx = new ActionSetOrder();
    idx.add(g0);
    idx.add(g0);
    assertThrows(OfError.class, () -> idx.check(out1));
    idx.remove(g0);
    assertThrows(OfError.class, () -> idx.check(out1));
    idx.remove(g0);
    idx.check(out1);
    idx.add(out1);
    assertThrows(OfError.class, () -> idx.check(ctl2));
    assertThrows(OfError.class, () -> idx.check(g0));
    idx.remove(out1);
    idx.check(ctl2);
    idx.check(g0);
  }
}
