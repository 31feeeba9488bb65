package net.uno.oneswitch.oftable;

import static net.uno.oneswitch.translate.Fixtures.bucket;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.IPv4AddressWithMask;
import org.projectfloodlight.openflow.types.IpProtocol;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFMetadata;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.OFVlanVidMatchWithMask;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.TransportPort;
import org.projectfloodlight.openflow.types.U32;
import org.projectfloodlight.openflow.types.U64;

/** The fake switch's OpenFlow 1.3 semantics (as OVS applies them), one behaviour at a time. */
class FakeOfTableTest {
  static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);
  static final Frame UDP =
      Frame.l4(0x020000000001L, 0x020000000002L, 0x0a000001, 0x0a000002, 17, 1000, 53);
  static final Frame ARP = Frame.arp(0x020000000001L, 1, 0x0a000001, 0x0a000002);

  private final FakeOfTable sw = new FakeOfTable("sw", Set.of(1, 2, 3, 4));

  static OFAction out(int p) {
    return F.actions().output(OFPort.of(p), 0xffff);
  }

  static OFAction vid(int v) {
    return F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(v)));
  }

  static OFAction ethDst(long mac) {
    return F.actions().setField(F.oxms().ethDst(MacAddress.of(mac)));
  }

  static OFAction pushVlan() {
    return F.actions().pushVlan(EthType.VLAN_FRAME);
  }

  static List<OFInstruction> apply(OFAction... a) {
    return List.of(F.instructions().applyActions(List.of(a)));
  }

  static Match.Builder m() {
    return F.buildMatch();
  }

  static Match ip() {
    return m().setExact(MatchField.ETH_TYPE, EthType.IPv4).build();
  }

  private List<String> send(Frame fr, int inPort) {
    return FakeOfTable.canonical(sw.process(fr, inPort));
  }

  private static String o(int port, Frame fr) {
    return port + ": " + fr;
  }

  @Test
  void theHighestPriorityMatchWinsAndAnEqualPriorityOverlapIsUndefined() {
    sw.addFlow(0, 10, m().build(), apply(out(2)), null);
    sw.addFlow(0, 20, ip(), apply(out(3)), null);
    assertEquals(List.of(o(3, UDP)), send(UDP, 1));
    assertEquals(List.of(o(2, ARP)), send(ARP, 1), "the lower one for what the higher misses");
    sw.addFlow(0, 20, m().setExact(MatchField.IN_PORT, OFPort.of(1)).build(), apply(out(4)), null);
    assertThrows(IllegalStateException.class, () -> send(UDP, 1));
    // An identical entry (table, priority, match) is replaced, not added.
    sw.addFlow(0, 10, m().build(), apply(out(4)), null);
    assertEquals(List.of(o(4, ARP)), send(ARP, 2));
  }

  @Test
  void masksAndPrerequisitesAsOvsAppliesThem() {
    assertThrows(
        IllegalArgumentException.class,
        () ->
            sw.addFlow(
                0,
                1,
                m().setExact(MatchField.IPV4_SRC, IPv4Address.of("10.0.0.1")).build(),
                apply(),
                null),
        "ipv4_src without eth_type=0x0800: BAD_PREREQ");
    assertThrows(
        IllegalArgumentException.class,
        () ->
            sw.addFlow(
                0,
                1,
                m().setExact(MatchField.ETH_TYPE, EthType.IPv4)
                    .setExact(MatchField.TCP_DST, TransportPort.of(53))
                    .build(),
                apply(),
                null),
        "tcp_dst without ip_proto=6");
    sw.addFlow(
        0,
        30,
        m().setExact(MatchField.ETH_TYPE, EthType.IPv4)
            .setMasked(MatchField.IPV4_DST, IPv4AddressWithMask.of("10.0.0.0/30"))
            .setExact(MatchField.IP_PROTO, IpProtocol.UDP)
            .setExact(MatchField.UDP_DST, TransportPort.of(53))
            .build(),
        apply(out(2)),
        null);
    sw.addFlow(
        0,
        20,
        m().setMasked(
                MatchField.VLAN_VID,
                OFVlanVidMatchWithMask.of(OFVlanVidMatch.PRESENT, OFVlanVidMatch.PRESENT))
            .build(),
        apply(out(3)),
        null);
    sw.addFlow(
        0, 10, m().setExact(MatchField.VLAN_VID, OFVlanVidMatch.NONE).build(), apply(out(4)), null);
    assertEquals(List.of(o(2, UDP)), send(UDP, 1));
    Frame other = Frame.l4(1, 2, 0x0a000001, 0x0a000009, 17, 1000, 53);
    assertEquals(List.of(o(4, other)), send(other, 1), "outside the /30: untagged");
    Frame tagged = other.tagged(0x8100, 3, 7);
    assertEquals(List.of(o(3, tagged)), send(tagged, 1), "any VLAN present");
    Frame tcp = Frame.l4(1, 2, 0x0a000001, 0x0a000002, 6, 1000, 53);
    assertEquals(List.of(o(4, tcp)), send(tcp, 1), "udp_dst never matches a TCP frame");
  }

  @Test
  void aTableMissEndsThePipelineAndOvsStillRunsItsActionSet() {
    sw.addFlow(
        0,
        1,
        m().build(),
        List.of(
            F.instructions().writeActions(List.of(out(2))),
            F.instructions().gotoTable(TableId.of(1))),
        null);
    sw.addFlow(1, 1, ip(), List.of(), null); // no goto: the set runs
    assertEquals(List.of(o(2, UDP)), send(UDP, 1));
    // OVS 3.1 (ofproto/trace): a miss in table 1 still runs the set written in table 0.
    assertEquals(List.of(o(2, ARP)), send(ARP, 1), "missed in table 1: the set runs");
    sw.addFlow(0, 2, m().setExact(MatchField.IN_PORT, OFPort.of(3)).build(), List.of(), null);
    assertEquals(List.of(), send(ARP, 3), "nothing written: nothing sent");
    assertEquals(
        List.of(),
        new FakeOfTable("empty", Set.of(1, 2)).process(ARP, 1),
        "a miss in table 0: nothing was written");
  }

  @Test
  void instructionsRunInTheSpecsOrderWithMetadataAcrossTables() {
    sw.addFlow(
        0,
        1,
        m().build(),
        List.of( // listed out of order on purpose
            F.instructions().gotoTable(TableId.of(3)),
            F.instructions().writeMetadata(U64.of(0xab00), U64.of(0xff00)),
            F.instructions().writeActions(List.of(out(4))),
            F.instructions().clearActions(),
            F.instructions().applyActions(List.of(F.actions().output(OFPort.CONTROLLER, 0xffff)))),
        null);
    sw.addFlow(
        3,
        5,
        m().setMasked(
                MatchField.METADATA, OFMetadata.of(U64.of(0xab00)), OFMetadata.of(U64.of(0xff00)))
            .build(),
        List.of(),
        null);
    // clear-actions runs before write-actions: the set keeps output:4.
    assertEquals(List.of(o(4, UDP), o(FakeOfTable.CONTROLLER, UDP)), send(UDP, 1));
    assertThrows(
        IllegalArgumentException.class,
        () ->
            sw.addFlow(
                3, 1, m().build(), List.of(F.instructions().gotoTable(TableId.of(2))), null));
  }

  @Test
  void applyActionsRunInListOrderOnTheFrame() {
    sw.addFlow(
        0,
        1,
        m().build(),
        apply(out(2), ethDst(0x0a), pushVlan(), vid(5), out(3), F.actions().popVlan(), out(4)),
        null);
    Frame changed = UDP.copy();
    changed.f.put("eth_dst", 0x0aL);
    assertEquals(
        List.of(o(2, UDP), o(3, changed.tagged(0x8100, 0, 5)), o(4, changed)), send(UDP, 1));
  }

  @Test
  void theActionSetRunsInOvsOrderWhateverTheWriteOrder() {
    sw.addFlow(
        0,
        1,
        m().build(),
        List.of(
            F.instructions().writeActions(List.of(out(2), vid(9), ethDst(0x0b), pushVlan())),
            F.instructions().gotoTable(TableId.of(1))),
        null);
    sw.addFlow(1, 1, m().build(), List.of(F.instructions().writeActions(List.of(out(3)))), null);
    Frame want = UDP.copy();
    want.f.put("eth_dst", 0x0bL);
    // push_vlan before set_field, and the last output only.
    assertEquals(List.of(o(3, want.tagged(0x8100, 0, 9))), send(UDP, 1));
    // A group in the set wins over its output.
    sw.addGroup(1, OFGroupType.INDIRECT, List.of(bucket(out(4))));
    sw.addFlow(
        1,
        1,
        m().build(),
        List.of(F.instructions().writeActions(List.of(F.actions().group(OFGroup.of(1))))),
        null);
    assertEquals(List.of(o(4, want.tagged(0x8100, 0, 9))), send(UDP, 1));
  }

  @Test
  void vlanPushAndPopKeepAtMostTwoHeaders() {
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(1)).build(),
        apply(pushVlan(), out(2)),
        null);
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(3)).build(),
        apply(F.actions().popVlan(), out(2)),
        null);
    assertEquals(
        List.of(o(2, UDP.tagged(0x8100, 0, 0))), send(UDP, 1), "vid 0, pcp 0: nothing copied");
    Frame q = UDP.tagged(0x88a8, 1, 10).tagged(0x8100, 2, 20);
    List<Frame.Vlan> vl = List.of(new Frame.Vlan(0x8100, 0, 0), new Frame.Vlan(0x88a8, 1, 10));
    List<FakeOfTable.Output> got = sw.process(q, 1);
    assertEquals(vl, got.get(0).frame().vlans(), "a third header drops the innermost");
    assertEquals(List.of(o(2, UDP.tagged(0x8100, 2, 20))), send(q, 3), "pop removes the outermost");
  }

  @Test
  void mplsGoesAfterTheVlanHeadersAndPopRestoresTheFrame() {
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(1)).build(),
        apply(
            F.actions().pushMpls(EthType.MPLS_UNICAST),
            F.actions().setField(F.oxms().mplsLabel(U32.of(77))),
            out(2)),
        null);
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.ETH_TYPE, EthType.MPLS_UNICAST)
            .setExact(MatchField.MPLS_LABEL, U32.of(77))
            .build(),
        apply(F.actions().popMpls(EthType.IPv4), out(3)),
        null);
    Frame q = UDP.tagged(0x88a8, 0, 10).tagged(0x8100, 0, 20);
    Frame labelled = sw.process(q, 1).get(0).frame();
    assertEquals(List.of(new Frame.Mpls(77, 0, true, 64)), labelled.mpls());
    assertEquals(q.vlans(), labelled.vlans(), "the shim after both VLAN headers");
    assertEquals(0x8847, labelled.ethType());
    assertEquals(
        null,
        labelled.field("ipv4_src") == null
            ? null
            : Fields.read(
                labelled,
                org.projectfloodlight.openflow.protocol.match.MatchFields.IPV4_SRC,
                new Fields.Pipeline(0, 0)),
        "IP hidden under the label");
    assertEquals(List.of(o(3, q)), send(labelled, 2), "popped: byte-identical to the original");
  }

  @Test
  void setFieldChangesOnlyAFieldTheFrameHas() {
    sw.addFlow(
        0,
        1,
        m().build(),
        apply(F.actions().setField(F.oxms().ipv4Dst(IPv4Address.of("1.2.3.4"))), out(2)),
        null);
    assertEquals(List.of(o(2, ARP)), send(ARP, 1), "no IPv4 header: unchanged");
    Frame want = UDP.copy();
    want.f.put("ipv4_dst", 0x01020304L);
    assertEquals(List.of(o(2, want)), send(UDP, 1));
    FakeOfTable t = new FakeOfTable("t", Set.of(1, 2));
    t.addFlow(0, 1, m().build(), apply(vid(3), out(2)), null);
    assertThrows(IllegalStateException.class, () -> t.process(UDP, 1), "OVS refuses it at add");
  }

  @Test
  void groupsAllIndirectAndSelectEachBucketOnItsOwnCopy() {
    sw.addGroup(1, OFGroupType.ALL, List.of(bucket(pushVlan(), vid(5), out(2)), bucket(out(3))));
    sw.addGroup(2, OFGroupType.INDIRECT, List.of(bucket(F.actions().group(OFGroup.of(1)))));
    List<OFBucket> sel = new ArrayList<>();
    for (int p = 1; p <= 4; p++) {
      sel.add(bucket(out(p)));
    }
    sw.addGroup(3, OFGroupType.SELECT, sel);
    sw.addGroup(
        4,
        OFGroupType.ALL,
        List.of(bucket(out(2), ethDst(0x0c), F.actions().pushMpls(EthType.MPLS_UNICAST))));
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(1)).build(),
        apply(F.actions().group(OFGroup.of(2))),
        null);
    assertEquals(List.of(o(2, UDP.tagged(0x8100, 0, 5)), o(3, UDP)), send(UDP, 1));
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(4)).build(),
        apply(F.actions().group(OFGroup.of(3))),
        null);
    Set<Integer> ports = new HashSet<>();
    for (int i = 0; i < 40; i++) {
      Frame fr = Frame.l4(1, 2, 0x0a000001, 0x0a000002 + i, 17, 1000 + i, 53);
      List<FakeOfTable.Output> a = sw.process(fr, 4);
      assertTrue(a.size() <= 1);
      assertEquals(a, sw.process(fr, 4), "the same frame, the same bucket");
      a.forEach(x -> ports.add(x.port()));
    }
    assertEquals(Set.of(1, 2, 3), ports, "every bucket used (the one to in_port 4 is dropped)");
    // A bucket is an action set: push_mpls before set_field, output last.
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(3)).build(),
        apply(F.actions().group(OFGroup.of(4))),
        null);
    Frame b = sw.process(UDP, 3).get(0).frame();
    assertEquals(0x0cL, b.field("eth_dst"));
    assertEquals(1, b.mpls().size());
  }

  @Test
  void outputsNeverGoBackOutOfTheInPortUnlessAskedTo() {
    sw.addFlow(
        0, 1, m().setExact(MatchField.IN_PORT, OFPort.of(1)).build(), apply(out(1), out(2)), null);
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(2)).build(),
        apply(F.actions().output(OFPort.IN_PORT, 0)),
        null);
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(3)).build(),
        apply(F.actions().output(OFPort.FLOOD, 0)),
        null);
    sw.addFlow(
        0,
        1,
        m().setExact(MatchField.IN_PORT, OFPort.of(4)).build(),
        apply(F.actions().output(OFPort.ALL, 0)),
        null);
    assertEquals(List.of(o(2, UDP)), send(UDP, 1));
    assertEquals(List.of(o(2, UDP)), send(UDP, 2));
    assertEquals(List.of(o(1, UDP), o(2, UDP), o(4, UDP)), send(UDP, 3));
    assertEquals(List.of(o(1, UDP), o(2, UDP), o(3, UDP)), send(UDP, 4));
  }

  @Test
  void eachEntryCountsItsPacketsAndBytes() {
    FakeOfTable.Flow a =
        sw.addFlow(0, 2, ip(), List.of(F.instructions().gotoTable(TableId.of(1))), "a");
    FakeOfTable.Flow b = sw.addFlow(0, 1, m().build(), apply(), "b");
    FakeOfTable.Flow c = sw.addFlow(1, 1, m().build(), apply(out(2)), "c");
    send(UDP, 1);
    send(UDP, 1);
    send(ARP, 1);
    assertEquals(2, a.packets());
    assertEquals(2 * (14 + 28), a.bytes());
    assertEquals(1, b.packets());
    assertEquals(14 + 28, b.bytes());
    assertEquals(2, c.packets());
    assertNotEquals(a.bytes(), b.bytes());
  }
}
