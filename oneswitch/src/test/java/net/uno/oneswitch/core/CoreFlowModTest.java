package net.uno.oneswitch.core;

import static net.uno.oneswitch.translate.Fixtures.F;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.rest.HttpStatus;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.Fixtures;
import net.uno.oneswitch.translate.OfError;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.projectfloodlight.openflow.protocol.OFPortStatus;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.IPv4AddressWithMask;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/** Virtual flow-table semantics of the core (no physical switch connected). */
class CoreFlowModTest extends CoreHarness {

  private static Match ip(String cidr, Integer inPort) {
    var b = F.buildMatch().setExact(MatchField.ETH_TYPE, EthType.IPv4);
    if (inPort != null) {
      b.setExact(MatchField.IN_PORT, OFPort.of(inPort));
    }
    IPv4AddressWithMask m = IPv4AddressWithMask.of(cidr);
    if (m.getMask().equals(IPv4Address.NO_MASK)) {
      b.setExact(MatchField.IPV4_SRC, m.getValue());
    } else {
      b.setMasked(MatchField.IPV4_SRC, m);
    }
    return b.build();
  }

  private static OFFlowMod add(int prio, Match m, long cookie, int outPort, OFFlowModFlags... f) {
    return F.buildFlowAdd()
        .setTableId(TableId.of(0))
        .setPriority(prio)
        .setMatch(m)
        .setCookie(U64.of(cookie))
        .setFlags(f.length == 0 ? Set.of() : Set.of(f))
        .setInstructions(Fixtures.apply(Fixtures.out(outPort)))
        .build();
  }

  private int count() throws Exception {
    return on(() -> core.vswitch().rules().size());
  }

  @Test
  void addReplaceModifyDeleteWithCookiesAndFilters() throws Exception {
    mod(add(10, ip("10.0.0.1/32", 2), 0x11, 4));
    mod(add(10, ip("10.0.0.2/32", 2), 0x12, 1));
    mod(add(20, ip("10.0.0.0/8", null), 0x21, 3));
    assertEquals(3, count());
    // ADD over an identical entry replaces it.
    mod(add(10, ip("10.0.0.1/32", 2), 0x13, 4));
    assertEquals(3, count());
    // CHECK_OVERLAP against a same-priority overlapping entry.
    OfError ov = refused(add(20, ip("10.1.0.0/16", null), 0, 1, OFFlowModFlags.CHECK_OVERLAP));
    assertEquals("FlowModFailed/OVERLAP", ov.typeAndCode());
    mod(add(21, ip("10.1.0.0/16", null), 0, 1, OFFlowModFlags.CHECK_OVERLAP)); // other priority
    assertEquals(4, count());
    // Non-strict MODIFY of 10.0.0.0/8 with cookie mask 0xf0 == 0x10: the two priority-10 rules.
    mod(
        F.buildFlowModify()
            .setTableId(TableId.of(0))
            .setMatch(ip("10.0.0.0/8", null))
            .setCookie(U64.of(0x10))
            .setCookieMask(U64.of(0xf0))
            .setInstructions(Fixtures.apply(Fixtures.out(3)))
            .build());
    long changed =
        on(
            () ->
                core.vswitch().rules().values().stream()
                    .filter(r -> r.instructions().equals(Fixtures.apply(Fixtures.out(3))))
                    .count());
    assertEquals(3, changed, "two cookie-0x1x rules + the one that already output to 3");
    // DELETE with out_port filter: only rules outputting to 3 at priority 20/10.
    mod(
        F.buildFlowDelete()
            .setTableId(TableId.ALL)
            .setMatch(F.buildMatch().build())
            .setOutPort(OFPort.of(1))
            .setOutGroup(OFGroup.ANY)
            .build());
    assertEquals(3, count(), "only the 10.1/16 rule output to 1");
    // DELETE_STRICT needs the exact priority and match.
    mod(
        F.buildFlowDeleteStrict()
            .setTableId(TableId.of(0))
            .setPriority(11)
            .setMatch(ip("10.0.0.1/32", 2))
            .setOutPort(OFPort.ANY)
            .setOutGroup(OFGroup.ANY)
            .build());
    assertEquals(3, count());
    mod(
        F.buildFlowDeleteStrict()
            .setTableId(TableId.of(0))
            .setPriority(10)
            .setMatch(ip("10.0.0.1/32", 2))
            .setOutPort(OFPort.ANY)
            .setOutGroup(OFGroup.ANY)
            .build());
    assertEquals(2, count());
    mod(
        F.buildFlowDelete()
            .setTableId(TableId.ALL)
            .setMatch(F.buildMatch().build())
            .setOutPort(OFPort.ANY)
            .setOutGroup(OFGroup.ANY)
            .build());
    assertEquals(0, count());
    assertTrue(on(() -> core.planner().liveTags().isEmpty()), "every tag released with its rules");
  }

  @Test
  void refusedModifyLeavesEverythingAsItWas() throws Exception {
    mod(add(10, ip("10.0.0.1/32", 2), 1, 1));
    List<VirtualRule> before = on(() -> List.copyOf(core.vswitch().rules().values()));
    var tagsBefore = on(() -> core.planner().liveTags());
    OfError e =
        refused(
            F.buildFlowModify()
                .setTableId(TableId.of(0))
                .setMatch(F.buildMatch().build())
                .setInstructions(
                    Fixtures.apply(Fixtures.out(3), F.actions().output(OFPort.NORMAL, 0)))
                .build());
    assertEquals("BadAction/BAD_OUT_PORT", e.typeAndCode());
    assertEquals(before, on(() -> List.copyOf(core.vswitch().rules().values())));
    assertEquals(
        tagsBefore,
        on(() -> core.planner().liveTags()),
        "tags acquired for the failed modify freed");
    assertEquals(
        "FlowModFailed/BAD_TABLE_ID",
        refused(
                add(10, ip("10.0.0.1/32", 2), 1, 1)
                    .createBuilder()
                    .setTableId(TableId.of(252))
                    .build())
            .typeAndCode());
  }

  @Test
  void groupDeleteRemovesTheFlowsThatUseIt() throws Exception {
    on(
        () -> {
          core.groupMods()
              .groupMod(
                  F.buildGroupAdd()
                      .setGroup(OFGroup.of(3))
                      .setGroupType(OFGroupType.ALL)
                      .setBuckets(
                          List.of(
                              F.buildBucket().setActions(List.of(Fixtures.out(1))).build(),
                              F.buildBucket().setActions(List.of(Fixtures.out(3))).build()))
                      .build());
          return null;
        });
    mod(
        F.buildFlowAdd()
            .setTableId(TableId.of(0))
            .setPriority(5)
            .setMatch(ip("10.0.0.1/32", 2))
            .setInstructions(Fixtures.apply(F.actions().group(OFGroup.of(3))))
            .build());
    mod(add(6, ip("10.0.0.2/32", 2), 0, 4));
    assertEquals(2, count());
    assertTrue(on(() -> core.planner().liveTags().keySet().containsAll(Set.of(1L, 3L))));
    OfError exists =
        on(
            () ->
                assertThrows(
                    OfError.class,
                    () ->
                        core.groupMods()
                            .groupMod(
                                F.buildGroupAdd()
                                    .setGroup(OFGroup.of(3))
                                    .setGroupType(OFGroupType.ALL)
                                    .setBuckets(List.of())
                                    .build())));
    assertEquals("GroupModFailed/GROUP_EXISTS", exists.typeAndCode());
    on(
        () -> {
          core.groupMods()
              .groupMod(
                  F.buildGroupDelete().setGroup(OFGroup.ALL).setGroupType(OFGroupType.ALL).build());
          return null;
        });
    assertEquals(1, count(), "the flow using group 3 went with it");
    assertTrue(on(() -> core.planner().liveTags().isEmpty()));
  }

  @Test
  void remapRetranslatesAndCountsAffectedRules() throws Exception {
    mod(add(10, ip("10.0.0.1/32", 2), 0, 4)); // host-local today
    mod(add(11, ip("10.0.0.2/32", 1), 0, 3)); // unaffected by V4
    var pc = on(() -> core.portChanges().remapPort(4, "snic0", 7)).get(10, TimeUnit.SECONDS);
    assertEquals(1, pc.rules());
    assertEquals(new VPort(4, "snic0", 7, "vm1"), pc.to());
    var phys =
        on(
            () ->
                core.planner()
                    .translationOf(core.vswitch().rules().keySet().iterator().next())
                    .get(0));
    assertTrue(phys.instructions().toString().contains("PushVlan"), phys.toString());
    assertTrue(phys.instructions().toString().contains("port=1,"), "toward snic0 over PCIe");
    PortError conflict =
        on(
            () ->
                assertThrows(
                    PortError.class, () -> core.portChanges().mapPort(9, "snic0", 7, null)));
    assertEquals(409, HttpStatus.of(conflict));
  }

  /**
   * Waits (10 s at most, else fails with {@code what}) until rule {@code k} has {@code n} replicas.
   */
  private void awaitTranslations(VirtualRule.Key k, int n, String what) throws Exception {
    long end = System.currentTimeMillis() + 10_000;
    while (on(() -> core.planner().translationOf(k).size()) != n) {
      assertTrue(System.currentTimeMillis() < end, what);
      Thread.sleep(20);
    }
  }

  @Test
  void aDrainWindowKeepsTheOldPortAsIngressThenItsExpiryRetranslates() throws Exception {
    mod(add(10, ip("10.0.0.1/32", 4), 0, 2)); // from V4 (host:101) to vm0
    var pc = on(() -> core.portChanges().remapPort(4, "snic0", 7, 300)).get(10, TimeUnit.SECONDS);
    assertEquals(1, pc.rules());
    VirtualRule.Key k = on(() -> core.vswitch().rules().keySet().iterator().next());
    assertEquals(2, on(() -> core.planner().translationOf(k).size()), "new port + draining port");
    assertEquals(1, on(() -> core.vswitch().ports().drains().size()));
    PortError bad =
        on(
            () ->
                assertThrows(
                    PortError.class, () -> core.portChanges().remapPort(4, "snic0", 8, 60_001)));
    assertEquals("drain_ms", bad.field());
    clock.addAndGet(301); // the window is over by the core's clock when its timer fires
    awaitTranslations(k, 1, "the drain never expired");
    assertTrue(on(() -> core.vswitch().ports().drains().isEmpty()));
    assertEquals("snic0", on(() -> core.planner().translationOf(k).get(0).sw()));
    // Mapping another vport onto a draining port ends that drain (no 409).
    on(() -> core.portChanges().remapPort(4, "host", 101, 5000)).get(10, TimeUnit.SECONDS);
    assertEquals(1, on(() -> core.vswitch().ports().drainsOf(4).size()));
    assertEquals(
        201,
        HttpStatus.of(
            on(() -> core.portChanges().mapPort(9, "snic0", 7, null)).get(10, TimeUnit.SECONDS)));
    assertTrue(on(() -> core.vswitch().ports().drains().isEmpty()));
    assertEquals(1, on(() -> core.planner().translationOf(k).size()));
  }

  private static OFPortStatus portStatus(OFPortReason reason, int port) {
    return F.buildPortStatus()
        .setReason(reason)
        .setDesc(
            F.buildPortDesc()
                .setPortNo(OFPort.of(port))
                .setHwAddr(MacAddress.of("02:00:00:00:00:01"))
                .setName("p" + port)
                .build())
        .build();
  }

  @Test
  void aDeletedDrainingPortDrainsNoMore() throws Exception {
    mod(add(10, ip("10.0.0.1/32", 4), 0, 2)); // from V4 (host:101) to vm0
    on(() -> core.portChanges().remapPort(4, "snic0", 7, 60_000)).get(10, TimeUnit.SECONDS);
    VirtualRule.Key k = on(() -> core.vswitch().rules().keySet().iterator().next());
    SouthSwitch host = new SouthSwitch("host", null, null, null, core.southListener());
    // Another port deleted, the draining one modified: the window goes on.
    core.southListener().portStatus(host, portStatus(OFPortReason.DELETE, 100));
    core.southListener().portStatus(host, portStatus(OFPortReason.MODIFY, 101));
    assertEquals(1, on(() -> core.vswitch().ports().drains().size()));
    assertEquals(2, on(() -> core.planner().translationOf(k).size()), "new port + draining port");
    // The draining port deleted (its instance stopped): its window ends now, re-translated.
    core.southListener().portStatus(host, portStatus(OFPortReason.DELETE, 101));
    awaitTranslations(k, 1, "the drain of the deleted port went on");
    assertTrue(on(() -> core.vswitch().ports().drains().isEmpty()));
    assertEquals("snic0", on(() -> core.planner().translationOf(k).get(0).sw()));
  }

  @Test
  void aTagARemapStopsUsingStaysRoutedToTheNewPlaceForAMoment() throws Exception {
    mod(add(10, ip("10.0.0.1/32", 1), 0, 4)); // snic0 wire -> V4 (host:101): tagged over PCIe
    assertEquals(Set.of(4L), on(() -> core.planner().liveTags().keySet()));
    int tag = on(() -> core.planner().liveTags().get(4L));
    // V4 moves next to the wire: the sender outputs locally, no rule needs V4's tag any more.
    var pc = on(() -> core.portChanges().remapPort(4, "snic0", 7, 0)).get(10, TimeUnit.SECONDS);
    assertEquals(1, pc.rules());
    assertEquals(
        tag, on(() -> core.planner().liveTags().get(4L)), "still live just after the remap");
    // (Translator.dispatch routes every live tag to its vport's current place: the host sends
    // it back over PCIe to snic0, so a frame still crossing PCIe with it reaches the new port.)
    long end = System.currentTimeMillis() + 10_000;
    while (on(() -> core.planner().liveTags().containsKey(4L))) {
      assertTrue(System.currentTimeMillis() < end, "the unused tag was never released");
      Thread.sleep(100);
    }
    assertTrue(on(() -> core.planner().liveTags().isEmpty()));
  }

  @Test
  void shrinkKeepsTheRemovedInstancesTagRoutedForAMomentAndFreesTheGroupId() throws Exception {
    mod(add(10, ip("10.0.0.1/32", 1), 0, 4)); // snic0 wire -> V4 (host:101)
    List<VPort.Loc> two = List.of(new VPort.Loc("host", 101), new VPort.Loc("snic1", 7));
    var pc = on(() -> core.portChanges().setInstances(4, two)).get(10, TimeUnit.SECONDS);
    assertEquals(1, pc.rules());
    long slot1 = net.uno.oneswitch.translate.Translator.tagKey(4, 1);
    assertTrue(
        on(() -> core.planner().liveTags().containsKey(slot1)),
        "snic0 reaches snic1's instance by tag");
    int gid = on(() -> core.planner().scaleGroups().get(4));
    assertTrue(net.uno.oneswitch.translate.Translator.isScaleGroup(gid));
    on(() -> core.portChanges().setInstances(4, List.of(new VPort.Loc("host", 101))))
        .get(10, TimeUnit.SECONDS);
    assertTrue(
        on(() -> core.planner().scaleGroups().isEmpty()),
        "group id freed with the second instance");
    assertTrue(
        on(() -> core.planner().liveTags().containsKey(slot1)),
        "still routed just after the shrink");
    long end = System.currentTimeMillis() + 10_000;
    while (on(() -> core.planner().liveTags().containsKey(slot1))) {
      assertTrue(System.currentTimeMillis() < end, "the removed instance's tag was never released");
      Thread.sleep(100);
    }
    assertEquals(
        Set.of(4L), on(() -> core.planner().liveTags().keySet()), "slot 0 (the vport's tag) stays");
    PortError dup =
        on(
            () ->
                assertThrows(
                    PortError.class,
                    () ->
                        core.portChanges()
                            .setInstances(
                                4,
                                List.of(new VPort.Loc("host", 101), new VPort.Loc("host", 101)))));
    assertEquals("instances[1]", dup.field());
  }

  @Test
  void aGroupChangeThatWouldMakeARuleUnfaithfulIsRefused() throws Exception {
    on(() ->
            core.portChanges()
                .setInstances(4, List.of(new VPort.Loc("host", 101), new VPort.Loc("snic1", 7))))
        .get(10, TimeUnit.SECONDS);
    var bucket1 = F.buildBucket().setActions(List.of(Fixtures.out(1))).build();
    on(
        () -> {
          core.groupMods()
              .groupMod(
                  F.buildGroupAdd()
                      .setGroup(OFGroup.of(3))
                      .setGroupType(OFGroupType.ALL)
                      .setBuckets(List.of(bucket1))
                      .build());
          return null;
        });
    mod(
        F.buildFlowAdd() // no in_port: fine while group 3 does not output to the scaled V4
            .setTableId(TableId.of(0))
            .setPriority(5)
            .setMatch(ip("10.0.0.1/32", null))
            .setInstructions(Fixtures.apply(F.actions().group(OFGroup.of(3))))
            .build());
    OfError e =
        on(
            () ->
                assertThrows(
                    OfError.class,
                    () ->
                        core.groupMods()
                            .groupMod(
                                F.buildGroupModify()
                                    .setGroup(OFGroup.of(3))
                                    .setGroupType(OFGroupType.ALL)
                                    .setBuckets(
                                        List.of(
                                            bucket1,
                                            F.buildBucket()
                                                .setActions(List.of(Fixtures.out(4)))
                                                .build()))
                                    .build())));
    assertEquals("GroupModFailed/BAD_BUCKET", e.typeAndCode());
    assertEquals(
        List.of(bucket1),
        on(() -> core.vswitch().groups().get(3).buckets()),
        "the old buckets stand");
  }
}
