package net.uno.oneswitch.core;

import static net.uno.oneswitch.translate.Fixtures.F;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import net.uno.oneswitch.translate.Carrier;
import net.uno.oneswitch.translate.Fixtures;
import net.uno.oneswitch.translate.GroupLabels;
import net.uno.oneswitch.translate.OfError;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.TableId;

/** Label variants of a controller group in the core: made, re-pointed by a GROUP_MOD, freed. */
class CoreGroupLabelsTest extends CoreHarness {
  private static final int IPV4 = 0x0800;

  private void run(Callable<Void> c) throws Exception {
    on(c);
  }

  private static OFGroupMod group(int id, boolean add, int... outs) {
    List<OFBucket> buckets =
        java.util.Arrays.stream(outs)
            .mapToObj(
                o ->
                    F.buildBucket()
                        .setWeight(0)
                        .setWatchPort(OFPort.ANY)
                        .setWatchGroup(OFGroup.ANY)
                        .setActions(List.of(Fixtures.out(o)))
                        .build())
            .toList();
    return (add ? F.buildGroupAdd() : F.buildGroupModify())
        .setGroup(OFGroup.of(id))
        .setGroupType(OFGroupType.ALL)
        .setBuckets(buckets)
        .build();
  }

  /** in_port=V2 (host), VLAN 10, IPv4: a push makes it QinQ before the group. */
  private static final Match QINQ =
      F.buildMatch()
          .setExact(MatchField.IN_PORT, OFPort.of(2))
          .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10))
          .setExact(MatchField.ETH_TYPE, EthType.IPv4)
          .build();

  private Map<Integer, GroupSpec> variantsOnHost() throws Exception {
    Map<Integer, GroupSpec> out = new java.util.TreeMap<>();
    on(() -> core.planner().desiredGroups())
        .getOrDefault("host", Map.of())
        .forEach(
            (id, g) -> {
              if (GroupLabels.isVariant(id)) {
                out.put(id, g);
              }
            });
    return out;
  }

  private boolean labelLive(int vport) throws Exception {
    return on(() -> core.planner().liveTags().containsKey(Carrier.mplsKey(vport, IPV4)));
  }

  private static boolean labels(GroupSpec g, int pcie) {
    return g.buckets().stream()
        .anyMatch(
            b -> {
              List<OFAction> a = b.getActions();
              return a.stream().anyMatch(x -> x.getType() == OFActionType.PUSH_MPLS)
                  && a.get(a.size() - 1).equals(Fixtures.out(pcie));
            });
  }

  @Test
  void aVariantFollowsItsGroupAndGoesWithItsRules() throws Exception {
    run(
        () -> {
          core.groupMods().groupMod(group(7, true, 1, 4)); // snic0 (across PCIe) and the host
          core.flowMods()
              .flowMod(
                  F.buildFlowAdd()
                      .setTableId(TableId.of(0))
                      .setPriority(5)
                      .setMatch(QINQ)
                      .setInstructions(
                          Fixtures.apply(
                              F.actions().pushVlan(EthType.VLAN_FRAME),
                              F.actions().group(OFGroup.of(7))))
                      .build());
          return null;
        });
    Map<Integer, GroupSpec> v = variantsOnHost();
    assertEquals(1, v.size());
    int id = v.keySet().iterator().next();
    assertEquals(7, on(() -> core.planner().groupOfPhysical(id)));
    assertTrue(labels(v.get(id), 1) && labelLive(1));
    // The controller's group now sends to snic1 (host PCIe port 2): the rule's labels follow.
    run(
        () -> {
          core.groupMods().groupMod(group(7, false, 3, 4));
          return null;
        });
    v = variantsOnHost();
    assertTrue(labels(v.get(id), 2) && !labels(v.get(id), 1), "re-pointed");
    assertTrue(labelLive(3) && !labelLive(1));
    // A controller group with a variant's id is refused.
    OfError e =
        on(() -> assertThrows(OfError.class, () -> core.groupMods().groupMod(group(id, true, 4))));
    assertEquals("GroupModFailed/INVALID_GROUP", e.typeAndCode());
    // The rule goes: so do the variant and its labels.
    run(
        () -> {
          core.flowMods()
              .flowMod(
                  F.buildFlowDeleteStrict()
                      .setTableId(TableId.of(0))
                      .setPriority(5)
                      .setMatch(QINQ)
                      .build());
          return null;
        });
    assertTrue(variantsOnHost().isEmpty());
    assertFalse(labelLive(3));
  }
}
