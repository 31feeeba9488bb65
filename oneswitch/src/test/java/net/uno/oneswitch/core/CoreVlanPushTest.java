package net.uno.oneswitch.core;

import static net.uno.oneswitch.translate.Fixtures.F;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.Fixtures;
import net.uno.oneswitch.translate.OfError;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.TableId;

/**
 * A VLAN push that reaches a later table re-translates that table's rules that match no vlan_vid
 * (VlanPushOrder): under the MPLS label where the ethertype is known, the push refused where a rule
 * cannot be carried; back to the VLAN tag when the push goes.
 */
class CoreVlanPushTest extends CoreHarness {
  private static final OFAction PUSH = F.actions().pushVlan(EthType.VLAN_FRAME);

  /** in_port=V2 (the host), optionally IPv4 or "no VLAN". */
  private static Match fromHost(boolean ip, boolean noVlan) {
    var b = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(2));
    if (ip) {
      b.setExact(MatchField.ETH_TYPE, EthType.IPv4);
    }
    if (noVlan) {
      b.setExact(MatchField.VLAN_VID, OFVlanVidMatch.UNTAGGED);
    }
    return b.build();
  }

  private static OFFlowMod add(int table, Match m, List<OFInstruction> ins) {
    return F.buildFlowAdd()
        .setTableId(TableId.of(table))
        .setPriority(5)
        .setMatch(m)
        .setInstructions(ins)
        .build();
  }

  /** Table 0: push a VLAN (the frame may come in tagged), then table 1 (or nowhere). */
  private static OFFlowMod push(Match m, boolean gotoTable1) {
    List<OFInstruction> ins = new ArrayList<>(Fixtures.apply(PUSH));
    if (gotoTable1) {
      ins.add(F.instructions().gotoTable(TableId.of(1)));
    }
    return add(0, m, ins);
  }

  /** The actions of the (one) physical replica of the table-1 rule: V1 is on snic0, across PCIe. */
  private List<OFAction> table1() throws Exception {
    return on(
        () -> {
          VirtualRule r =
              core.vswitch().rules().values().stream()
                  .filter(x -> x.table() == 1)
                  .findFirst()
                  .orElseThrow();
          List<PhysRule> p = core.planner().translationOf(r.key());
          assertEquals(1, p.size());
          return ((OFInstructionApplyActions) p.get(0).instructions().get(0)).getActions();
        });
  }

  /** DELETE_STRICT of the table-0 rule matching {@code fromHost(false, false)}. */
  private static OFFlowMod deleteFromHost() {
    return F.buildFlowDeleteStrict()
        .setTableId(TableId.of(0))
        .setPriority(5)
        .setMatch(fromHost(false, false))
        .build();
  }

  private static boolean has(List<OFAction> acts, OFActionType t) {
    return acts.stream().anyMatch(a -> a.getType() == t);
  }

  @Test
  void aPushReachingARelyingRuleMovesItToTheLabelAndBack() throws Exception {
    mod(add(1, fromHost(true, false), Fixtures.apply(Fixtures.out(1))));
    assertTrue(has(table1(), OFActionType.PUSH_VLAN) && !has(table1(), OFActionType.PUSH_MPLS));
    mod(push(fromHost(false, false), true));
    assertTrue(has(table1(), OFActionType.PUSH_MPLS), "a QinQ frame may reach it: the label");
    assertFalse(has(table1(), OFActionType.PUSH_VLAN));
    assertTrue(
        on(() -> core.planner().liveTags().keySet().stream().anyMatch(k -> k < 0)), "label live");
    // The push goes (delete): the VLAN tag again, the label freed.
    mod(deleteFromHost());
    assertTrue(has(table1(), OFActionType.PUSH_VLAN) && !has(table1(), OFActionType.PUSH_MPLS));
    assertFalse(
        on(() -> core.planner().liveTags().keySet().stream().anyMatch(k -> k < 0)), "label freed");
  }

  @Test
  void aPushIsRefusedOnlyWhereARelyingRuleCannotBeCarried() throws Exception {
    // Table 1: no ethertype, no vlan_vid matched, output across PCIe: no carrier for a QinQ frame.
    mod(add(1, fromHost(false, false), Fixtures.apply(Fixtures.out(1))));
    List<OFAction> before = table1();
    OfError e = refused(push(fromHost(false, false), true));
    assertEquals("BadAction/UNSUPPORTED_ORDER", e.typeAndCode());
    assertTrue(e.getMessage().contains("table 1"), e.getMessage());
    assertEquals(1, on(() -> core.vswitch().rules().size()));
    assertEquals(before, table1());
    // A push whose frame reaches no later table, or leaves one header ("no VLAN" matched): fine.
    mod(push(fromHost(false, false), false));
    mod(push(fromHost(false, true), true));
    assertEquals(3, on(() -> core.vswitch().rules().size()));
    assertEquals(before, table1());
    // MODIFY into a push that reaches table 1: refused as well, the rule unchanged.
    OfError m =
        refused(
            F.buildFlowModifyStrict()
                .setTableId(TableId.of(0))
                .setPriority(5)
                .setMatch(fromHost(false, false))
                .setInstructions(
                    List.of(
                        F.instructions().applyActions(List.of(PUSH)),
                        F.instructions().gotoTable(TableId.of(1))))
                .build());
    assertEquals("BadAction/UNSUPPORTED_ORDER", m.typeAndCode());
    assertEquals(before, table1());
  }

  @Test
  void aLaterPushAndAnEarlierActionSetOutputAcrossPcieExcludeEachOther() throws Exception {
    // Table 0 writes output:V1 (snic0) into the set; table 1 pushes (no goto): the set runs after
    // the
    // push, a frame that came in tagged is then QinQ, and the set's carrier is VLAN only.
    OFFlowMod set =
        add(
            0,
            fromHost(false, false),
            List.of(
                F.instructions().writeActions(List.of(Fixtures.out(1))),
                F.instructions().gotoTable(TableId.of(1))));
    OFFlowMod laterPush = add(1, fromHost(false, false), Fixtures.apply(PUSH, Fixtures.out(4)));
    mod(set);
    assertEquals("BadAction/UNSUPPORTED_ORDER", refused(laterPush).typeAndCode());
    assertEquals(1, on(() -> core.vswitch().rules().size()));
    mod(deleteFromHost());
    mod(laterPush);
    assertEquals("BadAction/UNSUPPORTED_ORDER", refused(set).typeAndCode());
    assertEquals(1, on(() -> core.vswitch().rules().size()));
  }
}
