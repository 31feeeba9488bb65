package net.uno.oneswitch.core;

import static net.uno.oneswitch.translate.Fixtures.F;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.translate.Fixtures;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.WriteActionSet;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;

/** Carrier groups in the core: lifetime with the rules, remap, reserved ids, set order. */
class CoreWriteActionsTest extends CoreHarness {
  private static final int C1 = WriteActionSet.CARRIER_GROUP_BASE + 1;

  private static OFFlowMod add(int table, int inPort, List<OFInstruction> ins) {
    return F.buildFlowAdd()
        .setTableId(TableId.of(table))
        .setPriority(1)
        .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(inPort)).build())
        .setInstructions(ins)
        .build();
  }

  private static List<OFInstruction> write(OFAction a) {
    return List.of(F.instructions().writeActions(List.of(a)));
  }

  private Map<String, Map<Integer, GroupSpec>> groups() throws Exception {
    return on(() -> core.planner().desiredGroups());
  }

  @Test
  void carrierLivesWithItsRulesAndFollowsARemap() throws Exception {
    mod(add(0, 2, write(Fixtures.out(1)))); // host -> V1 on snic0
    GroupSpec g = groups().get("host").get(C1);
    assertEquals(OFGroupType.INDIRECT, g.type());
    int tag = on(() -> core.planner().liveTags().get(1L));
    assertEquals(
        List.of(
            F.actions().pushVlan(org.projectfloodlight.openflow.types.EthType.VLAN_FRAME),
            F.actions()
                .setField(
                    F.oxms()
                        .vlanVid(org.projectfloodlight.openflow.types.OFVlanVidMatch.ofVlan(tag))),
            Fixtures.out(1)),
        g.buckets().get(0).getActions());
    assertFalse(groups().containsKey("snic0"), "only where a rule uses it");
    var pc = on(() -> core.portChanges().remapPort(1, "host", 7)).get(10, TimeUnit.SECONDS);
    assertEquals(0, pc.rules(), "the rule is unchanged: only the carrier moved");
    assertEquals(
        List.of(Fixtures.out(7)), groups().get("host").get(C1).buckets().get(0).getActions());
    on(
        () -> {
          core.flowMods()
              .flowMod(
                  F.buildFlowDelete()
                      .setTableId(TableId.ALL)
                      .setMatch(F.buildMatch().build())
                      .build());
          return null;
        });
    assertTrue(groups().getOrDefault("host", Map.of()).isEmpty(), "gone with its last rule");
  }

  @Test
  void controllerCannotUseCarrierIdsAndConflictingOrdersAreRefused() throws Exception {
    OfError e =
        on(
            () ->
                assertThrows(
                    OfError.class,
                    () ->
                        core.groupMods()
                            .groupMod(
                                F.buildGroupAdd()
                                    .setGroup(OFGroup.of(C1))
                                    .setGroupType(OFGroupType.ALL)
                                    .setBuckets(List.of())
                                    .build())));
    assertEquals("GroupModFailed/INVALID_GROUP", e.typeAndCode());
    on(
        () -> {
          core.groupMods()
              .groupMod(
                  F.buildGroupAdd()
                      .setGroup(OFGroup.of(7))
                      .setGroupType(OFGroupType.ALL)
                      .setBuckets(
                          List.of(
                              F.buildBucket()
                                  .setWatchPort(OFPort.ANY)
                                  .setWatchGroup(OFGroup.ANY)
                                  .setActions(List.of(Fixtures.out(4)))
                                  .build()))
                      .build());
          return null;
        });
    mod(add(0, 2, write(F.actions().group(OFGroup.of(7)))));
    e =
        on(
            () ->
                assertThrows(
                    OfError.class,
                    () -> core.flowMods().flowMod(add(1, 2, write(Fixtures.out(1))))));
    assertEquals("BadAction/UNSUPPORTED_ORDER", e.typeAndCode());
    assertEquals(1, on(() -> core.vswitch().rules().size()), "the refused rule is not installed");
    // With clear_actions first it is faithful.
    mod(
        add(
            1,
            2,
            List.of(
                F.instructions().clearActions(),
                F.instructions().writeActions(List.of(Fixtures.out(1))))));
    assertEquals(2, on(() -> core.vswitch().rules().size()));
  }
}
