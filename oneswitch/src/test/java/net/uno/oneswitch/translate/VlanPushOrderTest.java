package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.apply;
import static net.uno.oneswitch.translate.Fixtures.assertOfError;
import static net.uno.oneswitch.translate.Fixtures.out;
import static net.uno.oneswitch.translate.Fixtures.rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualRule;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.TableId;

/**
 * Seed 2 of test_equivalence: a VLAN pushed by an earlier table that a later match cannot see;
 * which tables such a push reaches.
 */
class VlanPushOrderTest {
  private static final OFAction PUSH = F.actions().pushVlan(EthType.VLAN_FRAME);

  private final CarrierTags tags = new CarrierTags();
  private final VlanPushOrder order = new VlanPushOrder();
  private static final net.uno.oneswitch.model.VirtualGroup GROUP =
      new net.uno.oneswitch.model.VirtualGroup(
          7,
          org.projectfloodlight.openflow.protocol.OFGroupType.ALL,
          List.of(
              F.buildBucket()
                  .setWeight(0)
                  .setWatchPort(OFPort.ANY)
                  .setWatchGroup(org.projectfloodlight.openflow.types.OFGroup.ANY)
                  .setActions(List.of(out(1)))
                  .build()));
  private final Translator t =
      new Translator(
              Fixtures.TOPO, PORTS, 252, tags::acquire, g -> g == 7, java.util.Map.of(), g -> GROUP)
          .depth(order::depth);

  private static Match m(Integer ethType, boolean vlan) {
    var b = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(2)); // V2 on the host
    if (ethType != null) {
      b.setExact(MatchField.ETH_TYPE, EthType.of(ethType));
    }
    if (vlan) {
      b.setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10));
    }
    return b.build();
  }

  private static VirtualRule pushInTable0() {
    return rule(
        0,
        10,
        m(null, false),
        List.of(
            F.instructions().applyActions(List.of(PUSH)),
            F.instructions().gotoTable(TableId.of(1))));
  }

  private static List<OFAction> acts(PhysRule p) {
    return ((OFInstructionApplyActions) p.instructions().get(0)).getActions();
  }

  /** An output to V1 (on snic0) in its three forms: apply-actions, action set, group 7. */
  private static List<List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction>>
      outputsToV1() {
    return List.of(
        apply(out(1)),
        List.of(F.instructions().writeActions(List.of(out(1)))),
        apply(F.actions().group(org.projectfloodlight.openflow.types.OFGroup.of(7))));
  }

  private static boolean labels(List<PhysRule> p) {
    return acts(p.get(0)).stream().anyMatch(a -> a.getType() == OFActionType.PUSH_MPLS);
  }

  @Test
  void withoutAnEarlierPushTheVlanCarrierStays() throws OfError {
    assertFalse(labels(t.rule(rule(1, 10, m(null, false), apply(out(1))))));
    assertFalse(labels(t.rule(rule(1, 10, m(0x0800, false), apply(out(1))))));
  }

  @Test
  void afterAnEarlierPushAnUnmatchedFrameTakesTheLabelOrIsRefused() throws OfError {
    VirtualRule push = pushInTable0();
    order.add(push);
    assertEquals(2, order.depth(1));
    assertEquals(1, order.depth(0));
    // Known ethertype: MPLS (the frame may be QinQ).
    assertTrue(labels(t.rule(rule(1, 10, m(0x0800, false), apply(out(1))))));
    // Neither VLAN nor ethertype matched: no carrier fits.
    for (List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction> ins :
        outputsToV1()) {
      assertOfError("BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(1, 10, m(null, false), ins)));
    }
    // Staying on the host (V4) needs no carrier. A vlan_vid match cannot see a second header
    // either (see aMatchedVlanAfterAQinQPushMayHideASecondHeader); "no VLAN" matched can.
    assertFalse(labels(t.rule(rule(1, 10, m(null, false), apply(out(4))))));
    assertFalse(labels(t.rule(rule(1, 10, NO_VLAN_FROM_HOST, apply(out(1))))));
  }

  @Test
  void ownPushOnAFrameMatchingNoVlanIsJudgedDeeper() throws OfError {
    // A frame that came in tagged is QinQ after the push: the VLAN carrier would be a third header.
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER",
        () -> t.rule(rule(0, 10, m(null, false), apply(PUSH, out(1)))));
    assertThrows(
        OfError.class,
        () ->
            t.rule(
                rule(
                    0,
                    10,
                    m(null, false),
                    apply(
                        PUSH,
                        F.actions().group(org.projectfloodlight.openflow.types.OFGroup.of(7))))));
    assertTrue(labels(t.rule(rule(0, 10, m(0x0800, false), apply(PUSH, out(1))))));
    // Matching "no VLAN" exactly: one header after the push, the VLAN carrier is fine.
    Match none =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.UNTAGGED)
            .build();
    assertFalse(labels(t.rule(rule(0, 10, none, apply(PUSH, out(1))))));
  }

  private static VirtualRule pushing(Match m, int gotoTable, OFAction... acts) {
    List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction> ins =
        new java.util.ArrayList<>(apply(acts));
    if (gotoTable >= 0) {
      ins.add(F.instructions().gotoTable(TableId.of(gotoTable)));
    }
    return rule(0, 10, m, ins);
  }

  private static final Match NO_VLAN =
      F.buildMatch().setExact(MatchField.VLAN_VID, OFVlanVidMatch.UNTAGGED).build();
  private static final Match NO_VLAN_FROM_HOST =
      F.buildMatch()
          .setExact(MatchField.IN_PORT, OFPort.of(2))
          .setExact(MatchField.VLAN_VID, OFVlanVidMatch.UNTAGGED)
          .build();

  /** A rule of table 1 matching no VLAN: {@code first}, then goto_table:2. */
  private static VirtualRule inTable1(
      org.projectfloodlight.openflow.protocol.instruction.OFInstruction first) {
    return rule(1, 10, m(null, false), List.of(first, F.instructions().gotoTable(TableId.of(2))));
  }

  /** The depths of tables 0..3 with only {@code rules} installed. */
  private static List<Integer> depths(VirtualRule... rules) {
    VlanPushOrder o = new VlanPushOrder();
    for (VirtualRule r : rules) {
      o.add(r);
    }
    return List.of(o.depth(0), o.depth(1), o.depth(2), o.depth(3));
  }

  @Test
  void aPushReachesTheTablesItsGotoLeadsToWhenTheFrameMayBeQinQ() {
    // Matching no vlan_vid, a push may make a tagged frame QinQ: tables 1 and above.
    assertEquals(List.of(1, 2, 2, 2), depths(pushInTable0()));
    // Without goto_table the pushed frame reaches no other table.
    assertEquals(List.of(1, 1, 1, 1), depths(pushing(m(null, false), -1, PUSH, out(1))));
    // "No VLAN" matched: one header after the push; two pushes: QinQ.
    assertEquals(List.of(1, 1, 1, 1), depths(pushing(NO_VLAN, 2, PUSH)));
    assertEquals(List.of(1, 1, 2, 2), depths(pushing(NO_VLAN, 2, PUSH, PUSH)));
    // A matched VLAN plus a push: QinQ. A push undone by a pop: as it came.
    assertEquals(List.of(1, 1, 2, 2), depths(pushing(m(null, true), 2, PUSH)));
    assertEquals(
        List.of(1, 1, 1, 1), depths(pushing(m(null, false), 2, PUSH, F.actions().popVlan())));
    // A push in the action set runs at the end: taken to reach every later table.
    assertEquals(
        List.of(1, 1, 2, 2), depths(inTable1(F.instructions().writeActions(List.of(PUSH)))));
    // A push in table 1, which a QinQ frame may reach already: OVS keeps 2 (drops the innermost).
    assertEquals(
        List.of(1, 2, 2, 2),
        depths(pushInTable0(), inTable1(F.instructions().applyActions(List.of(PUSH)))));
  }

  private static List<OFActionType> types(List<PhysRule> p) {
    return acts(p.get(0)).stream().map(OFAction::getType).toList();
  }

  @Test
  void qinqFromTheWireStartsEveryTableAtTwoHeaders() throws OfError {
    VlanPushOrder two = new VlanPushOrder(2);
    assertEquals(2, two.wire());
    assertEquals(List.of(2, 2), List.of(two.depth(0), two.depth(200)));
    two.add(pushInTable0()); // OVS keeps 2: a push raises nothing more
    assertEquals(2, two.depth(1));
    assertEquals(new VlanPushOrder(2).depths().at(7), 2);
    assertFalse(new VlanPushOrder(2).depths().equals(new VlanPushOrder().depths()));
    for (int bad : new int[] {0, 3}) {
      assertThrows(IllegalArgumentException.class, () -> new VlanPushOrder(bad));
    }
    Translator q =
        new Translator(
                Fixtures.TOPO,
                PORTS,
                252,
                tags::acquire,
                g -> g == 7,
                java.util.Map.of(),
                g -> GROUP)
            .depth(two::depth);
    // Known ethertype: the label (after every VLAN header), even at a rule matching no VLAN.
    assertTrue(labels(q.rule(rule(0, 10, m(0x0800, false), apply(out(1))))));
    // Known outer VLAN id, unknown ethertype: the id rewrite, no header added.
    List<OFActionType> rw = types(q.rule(rule(0, 10, m(null, true), apply(out(1)))));
    assertEquals(
        List.of(OFActionType.SET_FIELD, OFActionType.OUTPUT, OFActionType.SET_FIELD), rw, "" + rw);
    // Neither: refused (a VLAN tag would be a third header), in every output form.
    for (List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction> ins :
        outputsToV1()) {
      assertOfError("BadAction/UNSUPPORTED_ORDER", () -> q.rule(rule(0, 10, m(null, false), ins)));
    }
    // "No VLAN" matched: the VLAN tag is safe; staying on the host needs no carrier.
    assertEquals(
        OFActionType.PUSH_VLAN,
        types(q.rule(rule(0, 10, NO_VLAN_FROM_HOST, apply(out(1))))).get(0));
    assertFalse(labels(q.rule(rule(0, 10, m(null, false), apply(out(4))))));
    // With one header from the wire (the default), the same tagged rule takes the VLAN tag.
    assertEquals(
        OFActionType.PUSH_VLAN, types(t.rule(rule(0, 10, m(null, true), apply(out(1))))).get(0));
  }

  @Test
  void depthsFollowTheRulesAndTheRelyingRulesAreKnown() {
    VirtualRule push = pushInTable0();
    order.add(push);
    order.add(push); // the same rule twice (counted)
    VlanPushOrder.Depths two = order.depths();
    order.remove(push);
    assertEquals(2, order.depth(1));
    order.remove(push);
    assertEquals(1, order.depth(1));
    assertEquals(2, two.at(5));
    assertEquals(1, order.depths().at(5));
    assertEquals(new VlanPushOrder().depths(), order.depths()); // snapshots compare by value
    assertFalse(two.equals(order.depths()));
    // Rules whose translation depends on the depth: they may see a tag, and they output.
    assertTrue(VlanPushOrder.reliesOnDepth(rule(1, 10, m(null, false), apply(out(1)))));
    assertTrue(VlanPushOrder.reliesOnDepth(rule(1, 10, m(null, true), apply(out(1)))));
    assertFalse(VlanPushOrder.reliesOnDepth(rule(1, 10, NO_VLAN, apply(out(1)))));
    assertFalse(VlanPushOrder.reliesOnDepth(rule(1, 10, m(null, false), apply(PUSH))));
  }

  @Test
  void anActionSetRunsAfterThePushesOfLaterTables() throws OfError {
    // Table 1 pushes (no goto): a frame that came in tagged is QinQ when table 0's set runs.
    VirtualRule later = rule(1, 10, m(null, false), apply(PUSH, out(4)));
    assertEquals(0, order.later(1));
    order.add(later);
    assertEquals(2, order.later(1));
    assertEquals(0, order.later(2));
    assertEquals(1, order.depth(2)); // the apply path of later tables: unchanged
    List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction> setThenOn =
        List.of(
            F.instructions().writeActions(List.of(out(1))),
            F.instructions().gotoTable(TableId.of(1)));
    assertEquals(1, VlanPushOrder.setGoesOn(rule(0, 10, m(null, false), setThenOn)));
    assertEquals(-1, VlanPushOrder.setGoesOn(rule(0, 10, m(null, false), setThenOn.subList(0, 1))));
    // So table 0's set output across PCIe that goes on to table 1 (its carrier group is VLAN only)
    // is
    // refused, even for a frame matched as "no VLAN"; without goto, or to a local vport: fine.
    Translator tl = t.later(order::later);
    for (Match mm : List.of(m(null, false), NO_VLAN_FROM_HOST)) {
      assertOfError("BadAction/UNSUPPORTED_ORDER", () -> tl.rule(rule(0, 10, mm, setThenOn)));
    }
    tl.rule(rule(0, 10, m(null, false), setThenOn.subList(0, 1)));
    tl.rule(rule(0, 10, m(null, false), List.of(F.instructions().writeActions(List.of(out(4))))));
  }

  @Test
  void aMatchedVlanAfterAQinQPushMayHideASecondHeader() throws OfError {
    // The full check's seed 7: a rule matching VLAN 10 in a table a QinQ push reaches.
    order.add(pushInTable0());
    // The outer id 10 is known: the VLAN id rewrite, whatever the ethertype (2 headers possible);
    // through a group (buckets: VLAN tag only): refused.
    assertFalse(labels(t.rule(rule(1, 10, m(0x0800, true), apply(out(1))))));
    assertFalse(labels(t.rule(rule(1, 10, m(null, true), apply(out(1))))));
    assertTrue(tags.tagOf(Carrier.rewriteKey(1, 10)).isPresent());
    var group7 = apply(F.actions().group(org.projectfloodlight.openflow.types.OFGroup.of(7)));
    assertOfError("BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(1, 10, m(null, true), group7)));
    // Its own push on top: OVS drops the innermost of 3 (on the reference too), the label carries
    // the 2 left; unknown ethertype and the pushed id not set: refused.
    assertTrue(labels(t.rule(rule(1, 10, m(0x0800, true), apply(PUSH, out(1))))));
    assertThrows(OfError.class, () -> t.rule(rule(1, 10, m(null, true), apply(PUSH, out(1)))));
    // Staying on the switch needs no carrier.
    assertFalse(labels(t.rule(rule(1, 10, m(null, true), apply(PUSH, out(4))))));
  }

  private static VirtualRule pusher(Integer inPort, Integer ethType, OFAction... more) {
    var b = F.buildMatch();
    if (inPort != null) {
      b.setExact(MatchField.IN_PORT, OFPort.of(inPort));
    }
    if (ethType != null) {
      b.setExact(MatchField.ETH_TYPE, EthType.of(ethType));
    }
    List<OFAction> acts = new java.util.ArrayList<>(List.of(PUSH));
    acts.addAll(List.of(more));
    return rule(
        0,
        10 + acts.size() + (inPort == null ? 0 : inPort) * 7 + (ethType == null ? 0 : 3),
        b.build(),
        List.of(F.instructions().applyActions(acts), F.instructions().gotoTable(TableId.of(1))));
  }

  private static VirtualRule relying(Integer inPort, Integer ethType) {
    var b = F.buildMatch();
    if (inPort != null) {
      b.setExact(MatchField.IN_PORT, OFPort.of(inPort));
    }
    if (ethType != null) {
      b.setExact(MatchField.ETH_TYPE, EthType.of(ethType));
    }
    return rule(1, 5, b.build(), List.of(F.instructions().applyActions(List.of(out(1)))));
  }

  /**
   * A push reaches only the frames its rule can match: a later rule of another exact in_port, or of
   * another exact eth_type while no rule changes eth_type (MPLS), keeps the entry depth; one
   * matching neither, or the same, gets the push's.
   */
  @Test
  void aPushReachesOnlyRulesThatCanSeeItsFrames() {
    order.add(pusher(2, 0x0800));
    VlanPushOrder.Depths d = order.depths();
    assertEquals(2, d.at(1), "for any frame");
    assertEquals(1, d.of(relying(3, null)).at(1), "another in_port");
    assertEquals(1, d.of(relying(7, 0x0800)).at(1), "an in_port no pusher matches");
    assertEquals(1, d.of(relying(null, 0x0806)).at(1), "another eth_type");
    assertEquals(2, d.of(relying(2, null)).at(1), "the same in_port");
    assertEquals(2, d.of(relying(null, 0x0800)).at(1), "the same eth_type");
    assertEquals(2, d.of(relying(null, null)).at(1), "any frame");
    // A second pusher of any in_port reaches them all.
    VirtualRule any = pusher(null, null);
    order.add(any);
    assertEquals(2, order.depths().of(relying(3, 0x0806)).at(1));
    order.remove(any);
    // A rule that pushes MPLS may change eth_type: eth_type tells nothing then.
    VirtualRule mpls = pusher(5, null, F.actions().pushMpls(EthType.MPLS_UNICAST));
    order.add(mpls);
    assertEquals(2, order.depths().of(relying(5, 0x0806)).at(1), "in_port 5's push reaches it");
    assertEquals(2, order.depths().of(relying(2, 0x0806)).at(1), "eth_type may have changed");
    assertEquals(1, order.depths().of(relying(3, null)).at(1), "but not in_port 3's");
    order.remove(mpls);
    assertEquals(1, order.depths().of(relying(null, 0x0806)).at(1));
  }
}
