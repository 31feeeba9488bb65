package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.TOPO;
import static net.uno.oneswitch.translate.Fixtures.apply;
import static net.uno.oneswitch.translate.Fixtures.assertOfError;
import static net.uno.oneswitch.translate.Fixtures.out;
import static net.uno.oneswitch.translate.Fixtures.rule;
import static net.uno.oneswitch.translate.Fixtures.tagged;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketInReason;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/** Translation cases of UNO Table 1 and docs/translation.md. */
class TranslatorTest {
  private final TagAllocator tags = TagAllocator.vlan();
  private final Translator t = Fixtures.translator(tags, PORTS);

  private static Match inPort(int v) {
    return F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(v)).build();
  }

  private static List<OFAction> actions(PhysRule p) {
    return ((OFInstructionApplyActions) p.instructions().get(0)).getActions();
  }

  private static List<OFAction> concat(List<OFAction> a, List<OFAction> b) {
    List<OFAction> l = new ArrayList<>(a);
    l.addAll(b);
    return l;
  }

  @Test
  void singleIngressSingleEgressSameSwitch() throws OfError {
    List<PhysRule> ps = t.rule(rule(0, 10, inPort(2), apply(out(4))));
    assertEquals(1, ps.size());
    PhysRule p = ps.get(0);
    assertEquals("host", p.sw());
    assertEquals(1, p.table());
    assertEquals(10, p.priority());
    assertEquals(OFPort.of(100), p.match().get(MatchField.IN_PORT));
    assertEquals(List.of(out(101)), actions(p));
    assertTrue(tags.live().isEmpty(), "no tag for a local output");
  }

  @Test
  void singleIngressEgressOnOtherSwitchIsTaggedAndDispatched() throws OfError {
    PhysRule p = t.rule(rule(0, 10, inPort(1), apply(out(2)))).get(0);
    assertEquals("snic0", p.sw());
    assertEquals(OFPort.of(1), p.match().get(MatchField.IN_PORT));
    int tag = tags.tagOf(2).getAsInt();
    assertEquals(tagged(tag, 100), actions(p));
    // The host's table 0 matches the tag on the PCIe port, pops it, outputs to V2's port.
    PhysRule d =
        t.dispatch(tags.live()).stream()
            .filter(r -> r.sw().equals("host") && r.priority() == Translator.PRIO_TAG)
            .filter(r -> r.match().get(MatchField.IN_PORT).equals(OFPort.of(1)))
            .findFirst()
            .orElseThrow();
    assertEquals(OFVlanVidMatch.ofVlan(tag), d.match().get(MatchField.VLAN_VID));
    assertEquals(List.of(F.actions().popVlan(), out(100)), actions(d));
  }

  @Test
  void snicToSnicCrossesTheHostKeepingTheTag() throws OfError {
    PhysRule p = t.rule(rule(0, 10, inPort(1), apply(out(3)))).get(0);
    int tag = tags.tagOf(3).getAsInt();
    assertEquals(tagged(tag, 100), actions(p));
    List<PhysRule> d = t.dispatch(tags.live());
    PhysRule transit =
        d.stream()
            .filter(r -> r.sw().equals("host") && r.priority() == Translator.PRIO_TAG)
            .filter(r -> r.match().get(MatchField.IN_PORT).equals(OFPort.of(1)))
            .findFirst()
            .orElseThrow();
    assertEquals(List.of(out(2)), actions(transit), "forwarded toward snic1, tag kept");
    PhysRule egress =
        d.stream()
            .filter(r -> r.sw().equals("snic1") && r.priority() == Translator.PRIO_TAG)
            .findFirst()
            .orElseThrow();
    assertEquals(List.of(F.actions().popVlan(), out(1)), actions(egress));
  }

  @Test
  void everyTagIsRoutedFromEveryPcieSideSoInFlightFramesSurviveARemap() throws OfError {
    t.rule(rule(0, 10, inPort(1), apply(out(3)))); // a tag for V3 (on snic1)
    int tag = tags.tagOf(3).getAsInt();
    List<PhysRule> d = t.dispatch(tags.live());
    OFAction back = F.actions().output(OFPort.IN_PORT, 0xffff);
    // snic0 is not where V3 is: a tagged frame reaching it goes back to the host ...
    PhysRule atSnic0 =
        d.stream()
            .filter(r -> r.sw().equals("snic0") && r.priority() == Translator.PRIO_TAG)
            .findFirst()
            .orElseThrow();
    assertEquals(OFVlanVidMatch.ofVlan(tag), atSnic0.match().get(MatchField.VLAN_VID));
    assertEquals(List.of(back), actions(atSnic0));
    // ... and the host sends one arriving from snic1's own link back to snic1.
    PhysRule fromSnic1 =
        d.stream()
            .filter(r -> r.sw().equals("host") && r.priority() == Translator.PRIO_TAG)
            .filter(r -> r.match().get(MatchField.IN_PORT).equals(OFPort.of(2)))
            .findFirst()
            .orElseThrow();
    assertEquals(List.of(back), actions(fromSnic1));
    // One rule per tag per PCIe side: 2 links x (host end + sNIC end).
    assertEquals(4, d.stream().filter(r -> r.priority() == Translator.PRIO_TAG).count());
  }

  /** The PRIO_TAG dispatch rule of switch {@code sw} for frames from {@code inPort}. */
  private static PhysRule tagRuleAt(List<PhysRule> d, String sw, int inPort) {
    return d.stream()
        .filter(r -> r.sw().equals(sw) && r.priority() == Translator.PRIO_TAG)
        .filter(r -> r.match().get(MatchField.IN_PORT).equals(OFPort.of(inPort)))
        .findFirst()
        .orElseThrow();
  }

  @Test
  void aFrameInFlightToTheOldPlaceOfARemappedVportReachesItsDrainingPortInOrder() throws OfError {
    t.rule(rule(0, 10, inPort(1), apply(out(2)))); // snic0 tags frames for V2 (host:100)
    int tag = tags.tagOf(2).getAsInt();
    OFAction back = F.actions().output(OFPort.IN_PORT, 0xffff);
    List<OFAction> toOld = List.of(F.actions().popVlan(), out(100));
    List<OFAction> toNew = List.of(F.actions().popVlan(), out(5));
    // V2 moved to snic0:5; host:100 drains. A frame tagged on snic0 before the remap that reaches
    // the host from snic0's link goes to the draining port (not back behind later frames) ...
    PortMap moved = PORTS.with(new VPort(2, "snic0", 5, "vm0"));
    long until = Long.MAX_VALUE;
    Drain leaving = new Drain(2, new VPort.Loc("host", 100), until);
    List<PhysRule> d =
        Fixtures.translator(tags, moved.withDrains(List.of(leaving))).dispatch(tags.live());
    assertEquals(
        OFVlanVidMatch.ofVlan(tag), tagRuleAt(d, "host", 1).match().get(MatchField.VLAN_VID));
    assertEquals(toOld, actions(tagRuleAt(d, "host", 1)));
    // ... one from snic1's link may be sent after the remap (snic1 -> V2): on to snic0, as before
    assertEquals(List.of(out(1)), actions(tagRuleAt(d, "host", 2)));
    assertEquals(toNew, actions(tagRuleAt(d, "snic0", 100)));
    assertEquals(List.of(back), actions(tagRuleAt(d, "snic1", 100)));
    // Without the drain (window over), or with only a prepared port: back to the new place.
    List<PhysRule> over = Fixtures.translator(tags, moved).dispatch(tags.live());
    assertEquals(List.of(back), actions(tagRuleAt(over, "host", 1)));
    Drain prepared = new Drain(2, new VPort.Loc("host", 100), until, true);
    List<PhysRule> prep =
        Fixtures.translator(tags, moved.withDrains(List.of(prepared))).dispatch(tags.live());
    assertEquals(List.of(back), actions(tagRuleAt(prep, "host", 1)));
    // The other way: V2 back from snic0:5 to the host (host:102); snic0:5 drains. A frame the host
    // tagged before the remap reaching snic0 goes to the draining port; snic1 sends it back.
    PortMap home =
        PORTS
            .with(new VPort(2, "host", 102, "vm0"))
            .withDrains(List.of(new Drain(2, new VPort.Loc("snic0", 5), until)));
    List<PhysRule> h = Fixtures.translator(tags, home).dispatch(tags.live());
    assertEquals(List.of(F.actions().popVlan(), out(5)), actions(tagRuleAt(h, "snic0", 100)));
    assertEquals(List.of(back), actions(tagRuleAt(h, "snic1", 100)));
    assertEquals(List.of(F.actions().popVlan(), out(102)), actions(tagRuleAt(h, "host", 1)));
  }

  private static Match vlan10(int inPort) {
    return F.buildMatch()
        .setExact(MatchField.IN_PORT, OFPort.of(inPort))
        .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10))
        .build();
  }

  @Test
  void aThirdVlanHeaderIsRefusedUpFront() throws OfError {
    OFAction push = F.actions().pushVlan(EthType.VLAN_FRAME);
    OFAction pop = F.actions().popVlan();
    // VLAN packet + own push + carrier tag across PCIe = 3 headers: OVS would answer BAD_TAG.
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(0, 10, vlan10(2), apply(push, out(1)))));
    assertOfError("BadAction/BAD_TAG", () -> t.rule(rule(0, 10, vlan10(2), apply(push, push))));
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER",
        () -> t.rule(rule(0, 10, vlan10(2), apply(push, F.actions().output(OFPort.FLOOD, 0)))));
    // Two headers staying on the switch, a pop before crossing, or an untagged match: fine.
    assertDoesNotThrow(() -> t.rule(rule(0, 10, vlan10(2), apply(push, out(4)))));
    assertDoesNotThrow(() -> t.rule(rule(0, 10, vlan10(2), apply(push, pop, out(1)))));
    Match untagged =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.UNTAGGED)
            .build();
    assertDoesNotThrow(() -> t.rule(rule(0, 10, untagged, apply(push, out(1)))));
    // No vlan_vid match: the frame may have come in tagged (QinQ after the push; VlanPushOrder).
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(0, 10, inPort(2), apply(push, out(1)))));
    assertDoesNotThrow(() -> t.rule(rule(0, 10, vlan10(2), apply(out(1)))));
  }

  @Test
  void multiEgressFig6b() throws OfError {
    // in_port=V1, ip_src=10.0.0.1: set ip_src=1.1.1.1, output V2, output V4 (both on the host).
    Match m =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(1))
            .setExact(MatchField.ETH_TYPE, EthType.IPv4)
            .setExact(MatchField.IPV4_SRC, IPv4Address.of("10.0.0.1"))
            .build();
    OFAction set = F.actions().setField(F.oxms().ipv4Src(IPv4Address.of("1.1.1.1")));
    List<PhysRule> ps = t.rule(rule(0, 10, m, apply(set, out(2), out(4))));
    assertEquals(1, ps.size(), "only the ingress switch gets the rule");
    PhysRule p = ps.get(0);
    assertEquals("snic0", p.sw());
    assertEquals(IPv4Address.of("10.0.0.1"), p.match().get(MatchField.IPV4_SRC));
    List<OFAction> want = new ArrayList<>(List.of(set));
    want.addAll(tagged(tags.tagOf(2).getAsInt(), 100));
    want.addAll(tagged(tags.tagOf(4).getAsInt(), 100));
    assertEquals(want, actions(p));
    assertTrue(tags.tagOf(2).getAsInt() != tags.tagOf(4).getAsInt(), "one flow-id per egress");
  }

  @Test
  void multiEgressAcrossSwitches() throws OfError {
    PhysRule p = t.rule(rule(0, 10, inPort(2), apply(out(4), out(1), out(3)))).get(0);
    assertEquals("host", p.sw());
    List<OFAction> want = new ArrayList<>(List.of(out(101)));
    want.addAll(tagged(tags.tagOf(1).getAsInt(), 1));
    want.addAll(tagged(tags.tagOf(3).getAsInt(), 2));
    assertEquals(want, actions(p));
  }

  @Test
  void wildcardInPortIsReplicatedOnEverySwitchWithPorts() throws OfError {
    Match m = F.buildMatch().setExact(MatchField.ETH_TYPE, EthType.ARP).build();
    List<PhysRule> ps = t.rule(rule(2, 7, m, apply(out(2))));
    assertEquals(List.of("host", "snic0", "snic1"), ps.stream().map(PhysRule::sw).toList());
    assertTrue(ps.stream().allMatch(p -> p.table() == 3 && p.priority() == 7));
    assertEquals(List.of(out(100)), actions(ps.get(0)));
    assertEquals(tagged(tags.tagOf(2).getAsInt(), 100), actions(ps.get(1)));
    // Only switches with mapped ports run the pipeline.
    Translator t2 = Fixtures.translator(tags, PORTS.without(3));
    assertEquals(2, t2.rule(rule(2, 7, m, apply(out(2)))).size());
  }

  @Test
  void floodAndAllExpandToEveryMappedPort() throws OfError {
    for (OFPort reserved : List.of(OFPort.FLOOD, OFPort.ALL)) {
      PhysRule p =
          t.rule(rule(0, 1, inPort(2), apply(F.actions().output(reserved, 0xffff)))).get(0);
      List<OFAction> want = new ArrayList<>(tagged(tags.tagOf(1).getAsInt(), 1));
      want.add(out(100)); // the ingress port itself: the switch drops output to in_port
      want.addAll(tagged(tags.tagOf(3).getAsInt(), 2));
      want.add(out(101));
      assertEquals(want, actions(p), reserved.toString());
    }
  }

  @Test
  void reservedPortsControllerAndInPortPassThrough() throws OfError {
    OFAction ctl = F.actions().output(OFPort.CONTROLLER, 128);
    OFAction inp = F.actions().output(OFPort.IN_PORT, 0xffff);
    assertEquals(List.of(ctl, inp), actions(t.rule(rule(0, 1, inPort(1), apply(ctl, inp))).get(0)));
  }

  @Test
  void gotoTableAndMetadataMapToPhysicalTables() throws OfError {
    List<OFInstruction> ins =
        List.of(
            F.instructions().writeMetadata(U64.of(5), U64.of(0xff)),
            F.instructions().gotoTable(TableId.of(3)));
    PhysRule p = t.rule(rule(1, 1, inPort(2), ins)).get(0);
    assertEquals(2, p.table());
    assertEquals(ins.get(0), p.instructions().get(0));
    assertEquals(F.instructions().gotoTable(TableId.of(4)), p.instructions().get(1));
  }

  private void refused(String code, Runnable0 r) {
    assertOfError(code, r::run);
  }

  interface Runnable0 {
    void run() throws OfError;
  }

  @Test
  void refusals() {
    refused(
        "BadInstruction/BAD_TABLE_ID",
        () -> t.rule(rule(2, 1, inPort(2), List.of(F.instructions().gotoTable(TableId.of(2))))));
    refused(
        "BadInstruction/BAD_TABLE_ID",
        () -> t.rule(rule(2, 1, inPort(2), List.of(F.instructions().gotoTable(TableId.of(252))))));
    refused("FlowModFailed/BAD_TABLE_ID", () -> t.rule(rule(252, 1, inPort(2), apply())));
    refused(
        "BadAction/BAD_OUT_PORT",
        () -> t.rule(rule(0, 1, inPort(2), apply(F.actions().output(OFPort.NORMAL, 0)))));
    refused(
        "BadAction/BAD_OUT_PORT",
        () -> t.rule(rule(0, 1, inPort(2), apply(F.actions().output(OFPort.LOCAL, 0)))));
    refused(
        "BadAction/BAD_OUT_PORT",
        () -> t.rule(rule(0, 1, inPort(2), apply(F.actions().output(OFPort.TABLE, 0)))));
    refused(
        "BadAction/BAD_SET_TYPE",
        () ->
            t.rule(
                rule(0, 1, inPort(2), apply(F.actions().setField(F.oxms().inPort(OFPort.of(3)))))));
    refused(
        "BadAction/BAD_QUEUE", () -> t.rule(rule(0, 1, inPort(2), apply(F.actions().setQueue(1)))));
    refused(
        "BadAction/BAD_OUT_PORT",
        () ->
            t.rule(
                rule(
                    0, 1, inPort(2), List.of(F.instructions().writeActions(List.of(out(70000)))))));
    refused(
        "BadAction/BAD_OUT_GROUP",
        () -> t.rule(rule(0, 1, inPort(2), apply(F.actions().group(OFGroup.of(8))))));
    refused(
        "BadInstruction/UNSUP_INST",
        () -> t.rule(rule(0, 1, inPort(2), List.of(F.instructions().meter(1)))));
    refused(
        "BadInstruction/DUP_INST",
        () ->
            t.rule(
                rule(
                    0,
                    1,
                    inPort(2),
                    List.of(
                        F.instructions().applyActions(List.of()),
                        F.instructions().applyActions(List.of())))));
    refused(
        "BadMatch/BAD_FIELD",
        () ->
            t.rule(
                rule(
                    0,
                    1,
                    F.buildMatch()
                        .setExact(MatchField.IN_PORT, OFPort.of(2))
                        .setExact(MatchField.IN_PHY_PORT, OFPort.of(2))
                        .build(),
                    apply())));
    refused(
        "BadMatch/BAD_VALUE",
        () -> t.rule(rule(0, 1, inPort(OFPort.CONTROLLER.getPortNumber()), apply())));
    refused(
        "GroupModFailed/BAD_TYPE",
        () -> t.buckets(new VirtualGroup(1, OFGroupType.FF, List.of()), "host"));
    assertTrue(tags.live().isEmpty(), "refusals allocate nothing");
  }

  @Test
  void allowedWriteActionsPassThrough() throws OfError {
    OFInstruction w =
        F.instructions()
            .writeActions(
                List.of(
                    F.actions().output(OFPort.CONTROLLER, 64),
                    F.actions().group(OFGroup.of(7)),
                    F.actions().decNwTtl()));
    assertEquals(List.of(w), t.rule(rule(0, 1, inPort(2), List.of(w))).get(0).instructions());
  }

  @Test
  void unmappedInPortInstallsNothingUnmappedOutputDrops() throws OfError {
    assertEquals(List.of(), t.rule(rule(0, 1, inPort(9), apply(out(2)))));
    assertEquals(List.of(), actions(t.rule(rule(0, 1, inPort(2), apply(out(9)))).get(0)));
  }

  @Test
  void groupsSpanningSwitches() throws OfError {
    OFBucket b1 = F.buildBucket().setActions(List.of(out(1))).setWeight(1).build();
    OFBucket b2 = F.buildBucket().setActions(List.of(out(4))).setWeight(2).build();
    VirtualGroup g = new VirtualGroup(5, OFGroupType.SELECT, List.of(b1, b2));
    List<OFBucket> host = t.buckets(g, "host");
    // A bucket is an action set in OVS: tag pushed and set, one output, no trailing pop.
    assertEquals(bucketTagged(tags.tagOf(1).getAsInt(), 1), host.get(0).getActions());
    assertEquals(List.of(out(101)), host.get(1).getActions());
    assertEquals(2, host.get(1).getWeight());
    List<OFBucket> snic0 = t.buckets(g, "snic0");
    assertEquals(List.of(out(1)), snic0.get(0).getActions());
    assertEquals(bucketTagged(tags.tagOf(4).getAsInt(), 100), snic0.get(1).getActions());
  }

  private static List<OFAction> bucketTagged(int tag, int pcie) {
    List<OFAction> l = tagged(tag, pcie);
    return l.subList(0, l.size() - 1);
  }

  @Test
  void bucketsThatWouldClashWithTheTagAreRefused() {
    OFBucket ownVlan =
        F.buildBucket()
            .setActions(
                List.of(
                    F.actions().pushVlan(org.projectfloodlight.openflow.types.EthType.VLAN_FRAME),
                    out(1)))
            .build();
    OFBucket twoOutputs = F.buildBucket().setActions(List.of(out(1), out(2))).build();
    OFBucket flood = F.buildBucket().setActions(List.of(out(OFPort.FLOOD.getPortNumber()))).build();
    for (OFBucket b : List.of(ownVlan, twoOutputs, flood)) {
      VirtualGroup g = new VirtualGroup(6, OFGroupType.ALL, List.of(b));
      assertThrows(OfError.class, () -> t.buckets(g, "host"), b.toString());
    }
    // The controller's own VLAN push is fine while the bucket stays on its switch.
    OFBucket local =
        F.buildBucket()
            .setActions(
                List.of(
                    F.actions().pushVlan(org.projectfloodlight.openflow.types.EthType.VLAN_FRAME),
                    out(2)))
            .build();
    assertDoesNotThrow(
        () -> t.buckets(new VirtualGroup(7, OFGroupType.ALL, List.of(local)), "host"));
  }

  @Test
  void dispatchTableZeroFailsClosed() {
    List<PhysRule> d = t.dispatch(Map.of());
    Map<String, List<PhysRule>> by = d.stream().collect(Collectors.groupingBy(PhysRule::sw));
    for (String sw : TOPO.switches()) {
      assertTrue(
          by.get(sw).stream()
              .anyMatch(r -> r.priority() == 0 && r.instructions().isEmpty() && r.table() == 0),
          "drop-all on " + sw);
    }
    assertEquals(
        3,
        by.get("host").stream().filter(r -> r.priority() == Translator.PRIO_PORT).count(),
        "vm0, vm1 and in_port=CONTROLLER (packet-out through the pipeline)");
    assertTrue(d.stream().allMatch(r -> r.table() == 0));
  }

  @Test
  void packetInMapsBackToVirtualPortAndTable() {
    OFPacketIn pin =
        F.buildPacketIn()
            .setXid(77)
            .setBufferId(OFBufferId.NO_BUFFER)
            .setTotalLen(60)
            .setReason(OFPacketInReason.ACTION)
            .setTableId(TableId.of(3))
            .setCookie(U64.of(0x4242))
            .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(101)).build())
            .setData(new byte[60])
            .build();
    OFPacketIn v = t.packetIn("host", pin, U64.of(9)).orElseThrow();
    assertEquals(OFPort.of(4), v.getMatch().get(MatchField.IN_PORT));
    assertEquals(TableId.of(2), v.getTableId());
    assertEquals(U64.of(9), v.getCookie());
    assertEquals(0, v.getXid());
    // Not part of the virtual switch: PCIe port, dispatch table.
    OFPacketIn pcie =
        pin.createBuilder()
            .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(1)).build())
            .build();
    assertEquals(Optional.empty(), t.packetIn("host", pcie, U64.ZERO));
    assertEquals(
        Optional.empty(),
        t.packetIn("host", pin.createBuilder().setTableId(TableId.of(0)).build(), U64.ZERO));
  }

  @Test
  void packetInOfAHandedOffPacketReportsItsVirtualInPort() {
    // Handed off to snic0 from vport 2 (table offload): in_port is snic0's PCIe port, tunnel_id
    // names vport 2.
    OFPacketIn pin =
        F.buildPacketIn()
            .setBufferId(OFBufferId.NO_BUFFER)
            .setTotalLen(60)
            .setReason(OFPacketInReason.ACTION)
            .setTableId(TableId.of(2))
            .setCookie(U64.of(1))
            .setMatch(
                F.buildMatch()
                    .setExact(MatchField.IN_PORT, OFPort.of(100))
                    .setExact(MatchField.TUNNEL_ID, U64.of(Offload.code(2)))
                    .build())
            .setData(new byte[60])
            .build();
    OFPacketIn v = t.packetIn("snic0", pin, U64.of(9)).orElseThrow();
    assertEquals(OFPort.of(2), v.getMatch().get(MatchField.IN_PORT));
    assertEquals(false, v.getMatch().isExact(MatchField.TUNNEL_ID), "OneSwitch's field left out");
    assertEquals(TableId.of(1), v.getTableId());
    // A packet-out's frame handed off: CONTROLLER.
    OFPacketIn ctl =
        pin.createBuilder()
            .setMatch(
                F.buildMatch()
                    .setExact(MatchField.IN_PORT, OFPort.of(100))
                    .setExact(
                        MatchField.TUNNEL_ID,
                        U64.of(Offload.code(OFPort.CONTROLLER.getPortNumber())))
                    .build())
            .build();
    assertEquals(
        OFPort.CONTROLLER,
        t.packetIn("snic0", ctl, U64.ZERO).orElseThrow().getMatch().get(MatchField.IN_PORT));
    // tunnel_id on a port that is no PCIe port: not a handoff, not the virtual switch's.
    OFPacketIn odd =
        pin.createBuilder()
            .setMatch(
                F.buildMatch()
                    .setExact(MatchField.IN_PORT, OFPort.of(7))
                    .setExact(MatchField.TUNNEL_ID, U64.of(2))
                    .build())
            .build();
    assertEquals(Optional.empty(), t.packetIn("snic0", odd, U64.ZERO));
  }

  @Test
  void packetOutRunsOnTheIngressSwitch() throws OfError {
    var po =
        F.buildPacketOut()
            .setBufferId(OFBufferId.NO_BUFFER)
            .setInPort(OFPort.of(1))
            .setActions(List.of(out(2), F.actions().output(OFPort.TABLE, 0)))
            .setData(new byte[64])
            .build();
    Translator.PhysPacketOut p = t.packetOut(po);
    assertEquals("snic0", p.sw());
    assertEquals(OFPort.of(1), p.msg().getInPort());
    List<OFAction> want = new ArrayList<>(tagged(tags.tagOf(2).getAsInt(), 100));
    want.add(F.actions().output(OFPort.TABLE, 0));
    assertEquals(want, p.msg().getActions());
    var fromCtl =
        po.createBuilder().setInPort(OFPort.CONTROLLER).setActions(List.of(out(3))).build();
    Translator.PhysPacketOut q = t.packetOut(fromCtl);
    assertEquals("snic1", q.sw());
    assertEquals(List.of(out(1)), q.msg().getActions());
    refused(
        "BadRequest/BAD_PORT",
        () -> t.packetOut(po.createBuilder().setInPort(OFPort.of(9)).build()));
    refused(
        "BadRequest/BUFFER_UNKNOWN",
        () -> t.packetOut(po.createBuilder().setBufferId(OFBufferId.of(3)).build()));
    // From CONTROLLER through the pipeline: on the host (it has ports), in_port=CONTROLLER.
    Translator.PhysPacketOut r =
        t.packetOut(
            fromCtl
                .createBuilder()
                .setActions(List.of(F.actions().output(OFPort.TABLE, 0)))
                .build());
    assertEquals("host", r.sw());
    assertEquals(OFPort.CONTROLLER, r.msg().getInPort());
    assertTrue(
        t.dispatch(Map.of()).stream()
            .anyMatch(
                d ->
                    d.sw().equals("host")
                        && OFPort.CONTROLLER.equals(d.match().get(MatchField.IN_PORT))));
  }

  @SuppressWarnings("unused")
  private static List<OFAction> unused() {
    return concat(List.of(), List.of());
  }
}
