package net.uno.oneswitch.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.translate.GroupLabels;
import net.uno.oneswitch.translate.Translator;
import net.uno.oneswitch.translate.WriteActionSet;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFGroupAdd;
import org.projectfloodlight.openflow.protocol.OFGroupDelete;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupModify;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.types.OFPort;

/**
 * What OneSwitch owns on a physical switch: its flows' cookies carry a marker in every run, and on
 * a shared switch the groups it did not make (in this run, or in its reserved ranges) are never
 * planned.
 */
class PhysicalStateOwnershipTest {
  private static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private static PhysicalState.Plan install(PhysicalState ps, String sw, int n) {
    Map<PhysRule.Key, PhysRule> want = new java.util.LinkedHashMap<>();
    for (int i = 0; i < n; i++) {
      PhysRule r =
          new PhysRule(
              sw,
              1,
              10 + i,
              F.buildMatch()
                  .setExact(
                      org.projectfloodlight.openflow.protocol.match.MatchField.IN_PORT,
                      OFPort.of(1 + i))
                  .build(),
              List.of());
      want.put(r.key(), r);
    }
    return ps.plan(want, Map.of(), want.keySet(), Set.of(), Map.of(), Set.of(sw));
  }

  @Test
  void everyCookieCarriesTheMarkerAboveRandomBitsAndACounter() {
    PhysicalState a = new PhysicalState(0x123456);
    PhysicalState b = new PhysicalState(0x654321);
    install(a, "s", 3);
    install(b, "s", 1);
    long c0 = a.flows("s").values().stream().mapToLong(i -> i.cookie()).min().getAsLong();
    assertEquals(0x5512345600000001L, c0, Long.toHexString(c0));
    for (PhysicalState ps : List.of(a, b, new PhysicalState(), new PhysicalState(-1))) {
      install(ps, "t", 2);
      for (PhysicalState.Installed i : ps.flows("t").values()) {
        assertEquals(0x55, i.cookie() >>> 56, Long.toHexString(i.cookie()));
        assertTrue(PhysicalState.owned(i.cookie()), Long.toHexString(i.cookie()));
      }
    }
    long cb = b.flows("s").values().iterator().next().cookie();
    assertNotEquals(c0 & 0xffffffff00000000L, cb & 0xffffffff00000000L, "per-process bits");
    // A mark and issuedSince still tell this run's newer cookies apart.
    long mark = a.cookieMark();
    install(a, "u", 1);
    long newer = a.flows("u").values().iterator().next().cookie();
    assertTrue(a.issuedSince(newer, mark));
    assertFalse(a.issuedSince(c0, mark));
    assertFalse(a.issuedSince(cb, 0)); // another process's cookie: never this one's
  }

  @Test
  void onlyMarkedCookiesAreOwned() {
    for (long c : new long[] {0, 0x99, 0x1234, -1L, 0x4000000100000001L, 0x5400000000000000L}) {
      assertFalse(PhysicalState.owned(c), Long.toHexString(c));
    }
    for (long c : new long[] {0x5500000000000000L, 0x55ffffffffffffffL, 0x55abcdef00000001L}) {
      assertTrue(PhysicalState.owned(c), Long.toHexString(c));
    }
  }

  @Test
  void reservedGroupIdsAreOneSwitchsAndControllerIdsAreNot() {
    for (int g :
        new int[] {
          Translator.SCALE_GROUP_BASE,
          Translator.SCALE_GROUP_BASE + Translator.SCALE_GROUP_COUNT - 1,
          WriteActionSet.CARRIER_GROUP_BASE + 5,
          GroupLabels.BASE,
          GroupLabels.BASE + GroupLabels.COUNT - 1
        }) {
      assertTrue(PhysicalState.reservedGroup(g), Integer.toHexString(g));
    }
    for (int g : new int[] {0, 1, 7, 0x7fffffff, Translator.SCALE_GROUP_BASE - 1}) {
      assertFalse(PhysicalState.reservedGroup(g), Integer.toHexString(g));
    }
  }

  private static GroupSpec spec(int port) {
    return new GroupSpec(
        OFGroupType.ALL,
        List.of(
            F.buildBucket()
                .setWatchGroup(org.projectfloodlight.openflow.types.OFGroup.ANY)
                .setWatchPort(OFPort.ANY)
                .setActions(List.of(F.actions().output(OFPort.of(port), 0xffff)))
                .build()));
  }

  private static List<Integer> groupOps(PhysicalState.Plan p, Class<? extends OFGroupMod> kind) {
    return java.util.stream.Stream.of(p.groups, p.make, p.modify, p.remove)
        .flatMap(List::stream)
        .map(PhysicalState.Op::msg)
        .filter(kind::isInstance)
        .map(m -> ((OFGroupMod) m).getGroup().getGroupNumber())
        .sorted()
        .toList();
  }

  private static PhysicalState.Plan planGroups(
      PhysicalState ps, String sw, Map<Integer, GroupSpec> want) {
    return ps.plan(Map.of(), Map.of(), List.of(), Set.of(), Map.of(sw, want), Set.of(sw));
  }

  private static GroupSpec select(int... ports) {
    List<org.projectfloodlight.openflow.protocol.OFBucket> buckets = new java.util.ArrayList<>();
    for (int port : ports) {
      buckets.add(
          F.buildBucket()
              .setWeight(1)
              .setWatchGroup(org.projectfloodlight.openflow.types.OFGroup.ANY)
              .setWatchPort(OFPort.ANY)
              .setActions(List.of(F.actions().output(OFPort.of(port), 0xffff)))
              .build());
    }
    return new GroupSpec(OFGroupType.SELECT, buckets);
  }

  @Test
  void aNewScaleGroupIsAddedInAPhaseOfItsOwnBeforeAnyFlowAndItsChangesInTheModifyPhase() {
    int scale = Translator.SCALE_GROUP_BASE;
    PhysicalState ps = new PhysicalState(1);
    ps.adopt("host", Map.of(), true);
    // OneSwitch's scale group: alone, before the make phase (its selection method is set at that
    // phase's barrier, before a flow sends to it); a controller's group stays in the make phase.
    PhysicalState.Plan p =
        planGroups(ps, "host", new TreeMap<>(Map.of(scale, select(1, 2), 9, spec(3))));
    assertEquals(1, p.groups.size());
    assertTrue(p.groups.get(0).msg() instanceof OFGroupAdd);
    assertEquals(scale, ((OFGroupMod) p.groups.get(0).msg()).getGroup().getGroupNumber());
    assertEquals(List.of(9), groupOps(p, OFGroupAdd.class).stream().filter(g -> g == 9).toList());
    assertTrue(
        p.make.stream()
            .noneMatch(
                op -> op.msg() instanceof OFGroupMod g && g.getGroup().getGroupNumber() == scale));
    assertEquals(p.groups.size() + p.make.size() + p.modify.size() + p.remove.size(), p.size());
    // A resize: a modify, in the modify phase (south.SouthSwitch sends it over OpenFlow 1.5 only).
    p = planGroups(ps, "host", new TreeMap<>(Map.of(scale, select(1, 2, 3), 9, spec(3))));
    assertTrue(p.groups.isEmpty());
    assertEquals(List.of(scale), groupOps(p, OFGroupModify.class));
    assertTrue(p.modify.stream().anyMatch(op -> op.msg() instanceof OFGroupModify));
  }

  @Test
  void aSharedSwitchsForeignGroupsAreNeverModifiedOrDeleted() {
    int scale = Translator.SCALE_GROUP_BASE + 3;
    int carrier = WriteActionSet.CARRIER_GROUP_BASE + 5;
    Map<Integer, GroupSpec> dumped = new TreeMap<>();
    dumped.put(7, spec(300)); // the operator's
    dumped.put(8, spec(301)); // the operator's
    dumped.put(scale, spec(1)); // an earlier OneSwitch's
    dumped.put(carrier, spec(1)); // an earlier OneSwitch's
    PhysicalState ps = new PhysicalState(1);
    assertEquals(Set.of(7, 8), ps.adopt("dpu", dumped, true));
    assertEquals(Set.of(7, 8), ps.foreignGroups("dpu"));
    // OneSwitch wants 7 (a controller's group with the operator's id), 9 and the scale group.
    Map<Integer, GroupSpec> want = new TreeMap<>(Map.of(7, spec(1), 9, spec(1), scale, spec(2)));
    PhysicalState.Plan p = planGroups(ps, "dpu", want);
    assertEquals(List.of(9), groupOps(p, OFGroupAdd.class));
    assertEquals(List.of(scale), groupOps(p, OFGroupModify.class));
    assertEquals(List.of(carrier), groupOps(p, OFGroupDelete.class));
    // Nothing wanted any more: OneSwitch's own go, the operator's stay.
    p = planGroups(ps, "dpu", Map.of());
    assertEquals(Set.of(9, scale), Set.copyOf(groupOps(p, OFGroupDelete.class)));
    for (PhysicalState.Op op : p.remove) {
      OFMessage m = op.msg();
      int g = ((OFGroupMod) m).getGroup().getGroupNumber();
      assertFalse(g == 7 || g == 8);
    }
  }

  @Test
  void aGroupMadeInThisRunIsOneSwitchsAfterAReconnectAndAnOwnSwitchAdoptsEverything() {
    PhysicalState ps = new PhysicalState(1);
    ps.adopt("dpu", Map.of(), true);
    planGroups(ps, "dpu", Map.of(9, spec(1))); // OneSwitch adds 9
    ps.forget("dpu"); // the switch reconnects, holding 9 and the operator's 7
    assertEquals(Set.of(7), ps.adopt("dpu", Map.of(7, spec(300), 9, spec(1)), true));
    PhysicalState.Plan p = planGroups(ps, "dpu", Map.of());
    assertEquals(List.of(9), groupOps(p, OFGroupDelete.class));
    // Once deleted, 9 is no longer OneSwitch's: if it shows up again, it is someone else's.
    ps.forget("dpu");
    assertEquals(Set.of(7, 9), ps.adopt("dpu", Map.of(7, spec(300), 9, spec(1)), true));
    // A switch of OneSwitch's own: every group is taken, and those not wanted are deleted.
    PhysicalState own = new PhysicalState(1);
    assertEquals(Set.of(), own.adopt("host", Map.of(7, spec(300), 9, spec(1)), false));
    assertEquals(List.of(7, 9), groupOps(planGroups(own, "host", Map.of()), OFGroupDelete.class));
  }
}
