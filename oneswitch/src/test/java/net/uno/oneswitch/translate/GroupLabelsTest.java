package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.TOPO;
import static net.uno.oneswitch.translate.Fixtures.apply;
import static net.uno.oneswitch.translate.Fixtures.assertOfError;
import static net.uno.oneswitch.translate.Fixtures.out;
import static net.uno.oneswitch.translate.Fixtures.rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualGroup;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.U32;

/** The MPLS label variant of a controller group, for frames that may carry 2 VLAN headers. */
class GroupLabelsTest {
  private static final int IPV4 = 0x0800;
  private static final int VARIANT = GroupLabels.BASE + 3;
  private static final OFAction PUSH = F.actions().pushVlan(EthType.VLAN_FRAME);
  private static final OFAction GROUP = F.actions().group(OFGroup.of(7));
  private final CarrierTags tags = new CarrierTags();
  private final List<int[]> asked = new ArrayList<>();

  private static OFBucket bucket(OFAction... acts) {
    return F.buildBucket()
        .setWeight(0)
        .setWatchPort(OFPort.ANY)
        .setWatchGroup(OFGroup.ANY)
        .setActions(List.of(acts))
        .build();
  }

  /** Group 7: to V1 (snic0) with eth_dst set, to V4 (the host), to V3 (snic1). */
  private static final VirtualGroup G =
      new VirtualGroup(
          7,
          OFGroupType.ALL,
          List.of(
              bucket(
                  F.actions().setField(F.oxms().ethDst(MacAddress.of("02:00:00:00:00:03"))),
                  out(1)),
              bucket(out(4)),
              bucket(out(3))));

  private Translator translator(VirtualGroup g) {
    return new Translator(TOPO, PORTS, 252, tags::acquire, id -> id == 7, Map.of(), id -> g)
        .groupLabels(
            (group, et) -> {
              asked.add(new int[] {group, et});
              return VARIANT;
            });
  }

  /** in_port=V2 (the host), vlan_vid=10, IPv4 or any ethertype. */
  private static Match tagged(boolean ip) {
    var b =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10));
    if (ip) {
      b.setExact(MatchField.ETH_TYPE, EthType.IPv4);
    }
    return b.build();
  }

  private static List<OFAction> actions(PhysRule p) {
    return ((OFInstructionApplyActions) p.instructions().get(0)).getActions();
  }

  @Test
  void twoVlanHeadersWithAKnownEthertypeGoToTheLabelVariant() throws OfError {
    List<PhysRule> p = translator(G).rule(rule(0, 10, tagged(true), apply(PUSH, GROUP)));
    assertEquals(List.of(PUSH, F.actions().group(OFGroup.of(VARIANT))), actions(p.get(0)));
    assertEquals(1, asked.size());
    assertEquals(7, asked.get(0)[0]);
    assertEquals(IPV4, asked.get(0)[1]);
    // The rule holds the labels of the buckets across PCIe from the host (V1, V3), not V4's.
    Map<Long, Integer> live = tags.live();
    assertTrue(
        live.containsKey(Carrier.mplsKey(1, IPV4)) && live.containsKey(Carrier.mplsKey(3, IPV4)));
    assertEquals(2, live.size());
    // One header: the plain group, as before.
    assertEquals(
        List.of(GROUP),
        actions(translator(G).rule(rule(0, 10, tagged(true), apply(GROUP))).get(0)));
  }

  @Test
  void theVariantsBucketsPushTheLabelWhereTheyCrossPcie() throws OfError {
    translator(G).rule(rule(0, 10, tagged(true), apply(PUSH, GROUP)));
    int l1 = tags.tagOf(Carrier.mplsKey(1, IPV4)).getAsInt();
    int l3 = tags.tagOf(Carrier.mplsKey(3, IPV4)).getAsInt();
    List<OFBucket> b = GroupLabels.buckets(TOPO, PORTS, G, IPV4, "host", tags::tagOf).orElseThrow();
    assertEquals(
        List.of(
            F.actions().setField(F.oxms().ethDst(MacAddress.of("02:00:00:00:00:03"))),
            F.actions().pushMpls(EthType.MPLS_UNICAST),
            F.actions().setField(F.oxms().mplsLabel(U32.of(l1))),
            out(1)),
        b.get(0).getActions());
    assertEquals(List.of(out(101)), b.get(1).getActions()); // V4 is on the host
    assertEquals(
        List.of(
            F.actions().pushMpls(EthType.MPLS_UNICAST),
            F.actions().setField(F.oxms().mplsLabel(U32.of(l3))),
            out(2)),
        b.get(2).getActions());
    // A label not live: no variant on that switch (no rule there uses it).
    assertTrue(GroupLabels.buckets(TOPO, PORTS, G, 0x0806, "host", tags::tagOf).isEmpty());
    assertTrue(GroupLabels.isVariant(VARIANT) && !GroupLabels.isVariant(7));
  }

  @Test
  void refusedWhereTheLabelCannotCarryIt() {
    // Unknown ethertype: pop_mpls needs it.
    assertRefused(translator(G), tagged(false), apply(PUSH, GROUP));
    // A bucket across PCIe with an IP set_field (it would run on the MPLS frame).
    VirtualGroup ipSet =
        new VirtualGroup(
            7,
            OFGroupType.ALL,
            List.of(
                bucket(
                    F.actions().setField(F.oxms().ipv4Src(IPv4Address.of("10.0.0.1"))), out(1))));
    assertRefused(translator(ipSet), tagged(true), apply(PUSH, GROUP));
    // In an action set: the set's group takes no label.
    assertRefused(
        translator(G), tagged(true), List.of(F.instructions().writeActions(List.of(PUSH, GROUP))));
    // Mode vlan: never a label.
    assertThrows(
        OfError.class,
        () ->
            translator(G)
                .carrier(Carrier.Mode.VLAN)
                .rule(rule(0, 10, tagged(true), apply(PUSH, GROUP))));
    assertEquals(0, tags.live().size(), "a refusal takes no label");
  }

  private void assertRefused(
      Translator t,
      Match m,
      List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction> ins) {
    assertOfError("BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(0, 10, m, ins)));
  }
}
