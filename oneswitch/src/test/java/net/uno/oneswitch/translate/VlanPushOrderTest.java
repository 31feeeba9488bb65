package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.apply;
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
          .pushedBefore(order::pushesBefore);

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
    assertTrue(order.pushesBefore(1));
    assertFalse(order.pushesBefore(0));
    // Known ethertype: MPLS (the frame may be QinQ).
    assertTrue(labels(t.rule(rule(1, 10, m(0x0800, false), apply(out(1))))));
    // Neither VLAN nor ethertype matched: no carrier fits.
    for (List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction> ins :
        List.<List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction>>of(
            apply(out(1)),
            List.of(F.instructions().writeActions(List.of(out(1)))),
            apply(F.actions().group(org.projectfloodlight.openflow.types.OFGroup.of(7))))) {
      OfError e = assertThrows(OfError.class, () -> t.rule(rule(1, 10, m(null, false), ins)));
      assertEquals("BadAction/UNSUPPORTED_ORDER", e.typeAndCode());
    }
    // Staying on the host (V4) needs no carrier; a vlan_vid match sees the push: as before.
    assertFalse(labels(t.rule(rule(1, 10, m(null, false), apply(out(4))))));
    assertFalse(labels(t.rule(rule(1, 10, m(null, true), apply(out(1))))));
  }

  @Test
  void ownPushOnAFrameMatchingNoVlanIsJudgedDeeper() throws OfError {
    // A frame that came in tagged is QinQ after the push: the VLAN carrier would be a third header.
    OfError e =
        assertThrows(OfError.class, () -> t.rule(rule(0, 10, m(null, false), apply(PUSH, out(1)))));
    assertEquals("BadAction/UNSUPPORTED_ORDER", e.typeAndCode());
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

  @Test
  void aPushReachesTheTablesItsGotoLeadsToWhenTheFrameMayBeQinQ() {
    // Matching no vlan_vid, a push may make a tagged frame QinQ: tables 1 and above.
    assertEquals(1, VlanPushOrder.firstReached(pushInTable0()));
    // Without goto_table the pushed frame reaches no other table.
    assertEquals(-1, VlanPushOrder.firstReached(pushing(m(null, false), -1, PUSH, out(1))));
    // "No VLAN" matched: one header after the push; two pushes: QinQ.
    assertEquals(-1, VlanPushOrder.firstReached(pushing(NO_VLAN, 2, PUSH)));
    assertEquals(2, VlanPushOrder.firstReached(pushing(NO_VLAN, 2, PUSH, PUSH)));
    // A matched VLAN plus a push: QinQ. A push undone by a pop: as it came.
    assertEquals(2, VlanPushOrder.firstReached(pushing(m(null, true), 2, PUSH)));
    assertEquals(
        -1, VlanPushOrder.firstReached(pushing(m(null, false), 2, PUSH, F.actions().popVlan())));
    // A push in the action set runs at the end: taken to reach every later table.
    VirtualRule written =
        rule(
            1,
            10,
            m(null, false),
            List.of(
                F.instructions().writeActions(List.of(PUSH)),
                F.instructions().gotoTable(TableId.of(2))));
    assertEquals(2, VlanPushOrder.firstReached(written));
  }

  @Test
  void theLowestReachedTableAndTheRelyingTablesAreCounted() {
    assertEquals(Integer.MAX_VALUE, order.firstPushed());
    VirtualRule rely = rule(2, 10, m(null, false), apply(out(1)));
    order.add(rely);
    order.add(rule(1, 10, m(null, true), apply(out(1)))); // a vlan_vid match does not rely
    assertTrue(order.reliesIn(2, 3));
    assertFalse(order.reliesIn(0, 2));
    order.add(pushing(m(null, false), 2, PUSH));
    assertEquals(2, order.firstPushed());
    order.add(pushInTable0());
    assertEquals(1, order.firstPushed());
    assertTrue(order.pushesBefore(2) && order.pushesBefore(1) && !order.pushesBefore(0));
    order.remove(pushInTable0());
    assertEquals(2, order.firstPushed());
    assertFalse(order.pushesBefore(1));
    order.remove(rely);
    assertFalse(order.reliesIn(0, 3));
  }
}
