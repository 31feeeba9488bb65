package net.uno.oneswitch.it;

import static net.uno.oneswitch.it.Wait.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.Main;
import net.uno.oneswitch.core.Persistence;
import net.uno.oneswitch.core.PortChange;
import net.uno.oneswitch.rest.HttpStatus;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFeaturesReply;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFFlowDelete;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModifyStrict;
import org.projectfloodlight.openflow.protocol.OFFlowStatsReply;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPortDescStatsReply;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.errormsg.OFBadActionErrorMsg;
import org.projectfloodlight.openflow.protocol.errormsg.OFBadRequestErrorMsg;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * OneSwitch end to end against two fake physical switches and a raw OpenFlow client: handshake,
 * translation on the wire, barrier ordering, reconnect + reconcile, remap ordering, bad input.
 */
class OneSwitchTest {
  private static final OFFactory F = FakeSwitch.F;
  private TwoSwitches fx;
  private FakeSwitch host;
  private FakeSwitch snic;
  private Main.Running os;
  private Path dir;

  /** Where this test's messages start in {@link FakeSwitch#GLOBAL}. */
  private int start;

  @BeforeEach
  void up() throws Exception {
    start = FakeSwitch.GLOBAL.size();
    fx = TwoSwitches.options().vms(2).create();
    host = fx.host;
    snic = fx.snic;
    dir = fx.dir;
    os = fx.start();
    // reconciled: dispatch rules present on both, and each reconcile past its barrier (its flow
    // dump, which follows it, sent), so no reconcile round interleaves with what a test counts
    waitFor(() -> host.flows.size() >= 3 && snic.flows.size() >= 2);
    waitFor(() -> dumpedAfterBarrier(0xaL) && dumpedAfterBarrier(0xbL));
  }

  /** Whether {@code sw} was sent a flow dump after a barrier since this test began. */
  private boolean dumpedAfterBarrier(long sw) {
    boolean barrier = false;
    for (Map.Entry<Long, OFMessage> e : since(start)) {
      if (e.getKey() != sw) {
        continue;
      }
      if (e.getValue().getType() == OFType.BARRIER_REQUEST) {
        barrier = true;
      } else if (barrier
          && e.getValue() instanceof org.projectfloodlight.openflow.protocol.OFFlowStatsRequest) {
        return true;
      }
    }
    return false;
  }

  @AfterEach
  void down() throws Exception {
    fx.close();
  }

  private <T> T onCore(java.util.concurrent.Callable<T> c) {
    return fx.onCore(c);
  }

  private OfClient client() throws Exception {
    return fx.client();
  }

  private static OFFlowAdd flow(int table, int prio, Integer inPort, OFAction... acts) {
    var m = F.buildMatch();
    if (inPort != null) {
      m.setExact(MatchField.IN_PORT, OFPort.of(inPort));
    }
    return F.buildFlowAdd()
        .setXid(50)
        .setTableId(TableId.of(table))
        .setPriority(prio)
        .setMatch(m.build())
        .setInstructions(List.of(F.instructions().applyActions(List.of(acts))))
        .build();
  }

  private static OFAction out(int p) {
    return F.actions().output(OFPort.of(p), 0xffff);
  }

  private void barrier(OfClient c, long xid) throws Exception {
    c.send(F.buildBarrierRequest().setXid(xid).build());
    assertNotNull(c.expect(OFType.BARRIER_REPLY, xid, 10000));
  }

  private long flowsWithPriority(FakeSwitch sw, int prio) {
    return sw.flows.values().stream().filter(f -> f.getPriority() == prio).count();
  }

  @Test
  void aFlowModOnOneSwitchIsBarrieredThereAndSentNowhereElse() throws Exception {
    try (OfClient c = client()) {
      barrier(c, 60);
      int mark = FakeSwitch.GLOBAL.size();
      c.send(flow(0, 10, 2, out(3))); // host:100 -> host:101: only the host is touched
      barrier(c, 61);
      List<Map.Entry<Long, OFMessage>> seq =
          new ArrayList<>(FakeSwitch.GLOBAL.subList(mark, FakeSwitch.GLOBAL.size()));
      assertTrue(
          seq.stream()
              .anyMatch(
                  e -> e.getKey() == 0xaL && e.getValue().getType() == OFType.BARRIER_REQUEST));
      // The flow-mod touches the host only. (Whether the sNIC also gets a barrier is not asserted:
      // a
      // barrier of the connections' start-up can still arrive after the mark, and xids are per
      // switch.)
      assertTrue(
          seq.stream()
              .noneMatch(e -> e.getKey() == 0xbL && e.getValue().getType() == OFType.FLOW_MOD),
          "the sNIC got a flow-mod: " + seq);
    }
  }

  @Test
  void physicalRefusalAnswersTheControllerAndRollsBackEverySwitch() throws Exception {
    snic.refuse = fm -> fm.getPriority() == 77;
    try (OfClient c = client()) {
      // No in_port: one replica per switch; the sNIC refuses its replica, the host accepts its.
      c.send(flow(0, 77, null, out(2)));
      c.send(F.buildBarrierRequest().setXid(51).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 51, 10000));
      int err = -1;
      int bar = -1;
      for (int i = 0; i < c.seen.size(); i++) {
        OFMessage m = c.seen.get(i);
        if (m.getType() == OFType.ERROR && m.getXid() == 50) {
          err = i;
          assertEquals(OFBadActionCode.BAD_TAG, ((OFBadActionErrorMsg) m).getCode());
        } else if (m.getType() == OFType.BARRIER_REPLY && m.getXid() == 51) {
          bar = i;
        }
      }
      assertTrue(err >= 0, "the controller got no error for its flow-mod: " + c.seen);
      assertTrue(err < bar, "the error must come before the barrier reply covering it");
      assertTrue(onCore(() -> os.core().vswitch().rules().isEmpty()), "virtual rule rolled back");
      waitFor(() -> flowsWithPriority(host, 77) == 0); // the host's replica removed
      assertEquals(0, flowsWithPriority(snic, 77));
      assertEquals(1, os.core().metrics().physicalRefusals.get());

      // A MODIFY the sNIC refuses: the rule's previous actions come back on both switches.
      snic.refuse = fm -> false;
      c.send(flow(0, 78, null, out(2)));
      barrier(c, 52);
      snic.refuse = fm -> fm.getPriority() == 78;
      c.send(
          F.buildFlowModifyStrict()
              .setXid(53)
              .setTableId(TableId.of(0))
              .setPriority(78)
              .setMatch(F.buildMatch().build())
              .setInstructions(List.of(F.instructions().applyActions(List.of(out(3)))))
              .build());
      c.send(F.buildBarrierRequest().setXid(54).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 54, 10000));
      assertTrue(c.seen.stream().anyMatch(m -> m.getType() == OFType.ERROR && m.getXid() == 53));
      snic.refuse = fm -> false;
      barrier(c, 55);
      assertTrue(
          onCore(
              () ->
                  os.core().vswitch().rules().values().stream()
                      .allMatch(r -> r.instructions().toString().contains("port=2"))));
      waitFor(
          () ->
              host.flows.values().stream()
                  .filter(f -> f.getPriority() == 78)
                  .allMatch(f -> f.getInstructions().toString().contains("port=100")));
    }
  }

  @Test
  void handshakeFeaturesAndPortDesc() throws Exception {
    try (OfClient c = client()) {
      c.send(F.buildFeaturesRequest().setXid(2).build());
      OFFeaturesReply fr = (OFFeaturesReply) c.expect(OFType.FEATURES_REPLY, 2, 5000);
      assertEquals(0xeeL, fr.getDatapathId().getLong());
      assertEquals(252, fr.getNTables());
      c.send(F.buildPortDescStatsRequest().setXid(3).build());
      OFPortDescStatsReply pd = (OFPortDescStatsReply) c.expect(OFType.STATS_REPLY, 3, 5000);
      assertEquals(
          List.of(1, 2, 3),
          pd.getEntries().stream().map(d -> d.getPortNo().getPortNumber()).toList());
      assertEquals("vm0", pd.getEntries().get(1).getName());
    }
  }

  /**
   * Acts as Floodlight does on connect: reads TABLE_FEATURES and installs its priority-0 CONTROLLER
   * flow in each of its first tables whose APPLY_ACTIONS_MISS lists OUTPUT. Its reactive forwarding
   * then needs the miss flows to reach the switches and their PACKET_INs to come back as the
   * virtual switch's.
   */
  @Test
  void floodlightStyleTableMissIsInstalledAndPacketInsFlow() throws Exception {
    final int floodlightMissTables = 4;
    try (OfClient c = client()) {
      c.send(F.buildTableFeaturesStatsRequest().setXid(7).build());
      List<Integer> missTables = new ArrayList<>();
      while (true) {
        var r =
            (org.projectfloodlight.openflow.protocol.OFTableFeaturesStatsReply)
                c.expect(OFType.STATS_REPLY, 7, 5000);
        assertNotNull(r);
        for (var tf : r.getEntries()) {
          for (var p : tf.getProperties()) {
            if (p
                    instanceof
                    org.projectfloodlight.openflow.protocol.OFTableFeaturePropApplyActionsMiss m
                && m.getActionIds().stream()
                    .anyMatch(
                        a ->
                            a.getType()
                                == org.projectfloodlight.openflow.protocol.OFActionType.OUTPUT)
                && tf.getTableId().getValue() < floodlightMissTables) {
              missTables.add((int) tf.getTableId().getValue());
            }
          }
        }
        if (!r.getFlags()
            .contains(org.projectfloodlight.openflow.protocol.OFStatsReplyFlags.REPLY_MORE)) {
          break;
        }
      }
      assertEquals(List.of(0, 1, 2, 3), missTables);
      for (int t : missTables) {
        c.send(
            F.buildFlowAdd()
                .setXid(70 + t)
                .setTableId(TableId.of(t))
                .setPriority(0)
                .setInstructions(
                    List.of(
                        F.instructions()
                            .applyActions(
                                List.of(F.actions().output(OFPort.CONTROLLER, 0xffffffff)))))
                .build());
      }
      barrier(c, 79);
      for (FakeSwitch sw : List.of(host, snic)) {
        for (int t : missTables) {
          assertTrue(
              sw.flows.values().stream()
                  .anyMatch(
                      f ->
                          f.getTableId().getValue() == t + 1
                              && f.getPriority() == 0
                              && f.getInstructions()
                                  .equals(
                                      List.of(
                                          F.instructions()
                                              .applyActions(
                                                  List.of(
                                                      F.actions()
                                                          .output(
                                                              OFPort.CONTROLLER, 0xffffffff)))))),
              "table-miss of virtual table " + t);
        }
      }
      // A miss in virtual table 0 on vm0's port comes back as the virtual switch's PACKET_IN.
      OFFlowMod miss =
          host.flows.values().stream()
              .filter(f -> f.getTableId().getValue() == 1 && f.getPriority() == 0)
              .findFirst()
              .orElseThrow();
      host.send(
          F.buildPacketIn()
              .setXid(0)
              .setBufferId(org.projectfloodlight.openflow.types.OFBufferId.NO_BUFFER)
              .setTableId(TableId.of(1))
              .setReason(org.projectfloodlight.openflow.protocol.OFPacketInReason.ACTION)
              .setCookie(miss.getCookie())
              .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(100)).build())
              .setData(new byte[60])
              .build());
      var pin =
          (org.projectfloodlight.openflow.protocol.OFPacketIn) c.expect(OFType.PACKET_IN, -1, 5000);
      assertNotNull(pin);
      assertEquals(2, pin.getMatch().get(MatchField.IN_PORT).getPortNumber());
      assertEquals(0, pin.getTableId().getValue());
    }
  }

  @Test
  void barrierAnsweredOnlyAfterEveryPhysicalBarrier() throws Exception {
    try (OfClient c = client()) {
      host.holdBarriers();
      c.send(flow(0, 10, 1, out(2))); // ingress snic0, egress host: touches both switches
      c.send(F.buildBarrierRequest().setXid(99).build());
      waitFor(
          () ->
              snic.flows.values().stream()
                  .anyMatch(f -> f.getTableId().getValue() == 1 && f.getPriority() == 10));
      assertNull(c.expect(OFType.BARRIER_REPLY, 99, 700), "barrier reply before host's barrier");
      host.releaseBarriers();
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 99, 10000));
      OFFlowMod phys =
          snic.flows.values().stream()
              .filter(f -> f.getTableId().getValue() == 1)
              .findFirst()
              .orElseThrow();
      assertEquals(OFPort.of(1), phys.getMatch().get(MatchField.IN_PORT));
      String acts = phys.getInstructions().toString();
      assertTrue(acts.contains("pushVlan") || acts.contains("PushVlan"), acts);
      // the host got the tag dispatch rule: in_port=PCIe, vlan -> pop, output 100
      assertTrue(
          host.flows.values().stream()
              .anyMatch(
                  f ->
                      f.getTableId().getValue() == 0
                          && f.getPriority() == 200
                          && f.getMatch().get(MatchField.IN_PORT).equals(OFPort.of(1))));
    }
  }

  @Test
  void refusedFlowModAnswersErrorAndChangesNothing() throws Exception {
    try (OfClient c = client()) {
      int before = host.logSnapshot().size() + snic.logSnapshot().size();
      c.send(
          flow(0, 10, 2, F.actions().output(OFPort.NORMAL, 0)).createBuilder().setXid(7).build());
      OFMessage e = c.expect(OFType.ERROR, 7, 5000);
      assertEquals(OFBadActionCode.BAD_OUT_PORT, ((OFBadActionErrorMsg) e).getCode());
      barrier(c, 8);
      assertEquals(0, (int) onCore(() -> os.core().vswitch().rules().size()));
      long flowMods =
          java.util.stream.Stream.concat(host.logSnapshot().stream(), snic.logSnapshot().stream())
              .skip(0)
              .filter(m -> m.getType() == OFType.FLOW_MOD)
              .count();
      assertEquals(6, flowMods, "only the initial dispatch rules were ever sent");
      assertTrue(host.logSnapshot().size() + snic.logSnapshot().size() >= before);
    }
  }

  @Test
  void flowStatsSumReplicaCounters() throws Exception {
    try (OfClient c = client()) {
      c.send(flow(0, 3, null, out(2))); // wildcard in_port: replicated on host and snic0
      barrier(c, 9);
      c.send(
          F.buildFlowStatsRequest()
              .setXid(10)
              .setTableId(TableId.ALL)
              .setOutPort(OFPort.ANY)
              .setOutGroup(OFGroup.ANY)
              .setMatch(F.buildMatch().build())
              .setCookie(U64.ZERO)
              .setCookieMask(U64.ZERO)
              .build());
      OFFlowStatsReply r = (OFFlowStatsReply) c.expect(OFType.STATS_REPLY, 10, 5000);
      assertEquals(1, r.getEntries().size());
      assertEquals(20, r.getEntries().get(0).getPacketCount().getValue(), "10 per replica");
      assertEquals(2000, r.getEntries().get(0).getByteCount().getValue());
      assertEquals(0, r.getEntries().get(0).getTableId().getValue());
    }
  }

  @Test
  void reconnectReconcilesDeletingStaleAndReinstalling() throws Exception {
    try (OfClient c = client()) {
      c.send(flow(0, 10, 1, out(3)));
      barrier(c, 11);
      int before = snic.connections();
      snic.flows.clear(); // the switch restarted empty...
      snic.addStale(0x99); // ...with a leftover flow of someone else
      snic.disconnect();
      waitFor(() -> snic.connections() > before);
      waitFor(
          () ->
              !snic.flows.containsKey(0x99L)
                  && snic.flows.values().stream()
                      .anyMatch(f -> f.getTableId().getValue() == 1 && f.getPriority() == 10));
      assertEquals(
          4,
          snic.flows.size(),
          "drop, in_port=1 dispatch, the translated rule, the PCIe tag rule toward V3");
    }
  }

  @Test
  void remapIsMakeBeforeBreakAcrossSwitches() throws Exception {
    try (OfClient c = client()) {
      Remapped r = v3RulesThenRemap(c, 12, 0);
      PortChange pc = r.pc();
      assertEquals(2, pc.rules());
      List<Map.Entry<Long, OFMessage>> seq = r.seq();
      int lastAdd = -1;
      int firstMod = Integer.MAX_VALUE;
      int lastMod = -1;
      int firstDel = Integer.MAX_VALUE;
      for (int i = 0; i < seq.size(); i++) {
        OFMessage m = seq.get(i).getValue();
        if (m instanceof OFFlowAdd) {
          lastAdd = i;
        } else if (m instanceof OFFlowModifyStrict) {
          firstMod = Math.min(firstMod, i);
          lastMod = i;
        } else if (m instanceof OFFlowDelete) {
          firstDel = Math.min(firstDel, i);
        }
      }
      assertTrue(lastAdd >= 0 && firstMod < Integer.MAX_VALUE && firstDel < Integer.MAX_VALUE);
      assertTrue(lastAdd < firstMod, "every new rule before any re-pointing");
      assertTrue(
          lastMod < firstDel,
          "old rules deleted last: "
              + seq.stream()
                  .map(
                      e ->
                          Long.toHexString(e.getKey())
                              + ":"
                              + e.getValue().getType()
                              + e.getValue().getClass().getSimpleName().replace("OFFlow", ""))
                  .toList());
      for (long sw : List.of(0xaL, 0xbL)) {
        // A switch sent new rules answered a barrier after them, before any re-pointing; EVERY
        // switch answered a fresh barrier after the re-pointing, before the break (the round trip
        // that also lets frames still crossing PCIe under the old rules arrive).
        int swAdd = lastOf(seq, sw, OFFlowAdd.class);
        assertTrue(
            swAdd < 0 || barrierBetween(seq, sw, swAdd, firstMod),
            "barrier on switch " + sw + " between make and modify");
        int swMod = lastOf(seq, sw, OFFlowModifyStrict.class);
        assertTrue(
            barrierBetween(seq, sw, Math.max(swMod, swAdd), firstDel),
            "barrier on switch " + sw + " between modify and break");
      }
      // The core saw both switches answer the modify phase's (fresh) barriers.
      assertEquals(
          Set.of("host", "snic0"),
          pc.trace().phases().stream()
              .filter(p -> p.name().equals("modify"))
              .findFirst()
              .orElseThrow()
              .barrierMs()
              .keySet(),
          pc.trace().toString());
      assertTrue(lastOf(seq, 0xbL, OFFlowAdd.class) >= 0, "snic0 got the new rules");
      // Final state: in_port=200 on snic0 outputs locally to port 1; the host holds no V3 rule.
      assertTrue(snicHasV3RuleAt200(), "in_port=200 translated on snic0");
      assertFalse(
          host.flows.values().stream()
              .anyMatch(x -> OFPort.of(101).equals(x.getMatch().get(MatchField.IN_PORT))));
    }
  }

  /** in_port=V3 (host:101) -> eth0 and eth0 (snic0) -> V3 (tagged toward the host), barriered. */
  private void v3Rules(OfClient c, long xid) throws Exception {
    c.send(flow(0, 10, 3, out(1)));
    c.send(flow(0, 5, 1, out(3)));
    barrier(c, xid);
  }

  /** V3 moves to snic0:200 with {@code drainMs}. */
  private PortChange remapV3(long drainMs) throws Exception {
    return onCore(() -> os.core().portChanges().remapPort(3, "snic0", 200, drainMs))
        .get(20, TimeUnit.SECONDS);
  }

  private boolean snicHasV3RuleAt200() {
    return snic.flows.values().stream()
        .anyMatch(
            x ->
                x.getTableId().getValue() == 1
                    && OFPort.of(200).equals(x.getMatch().get(MatchField.IN_PORT)));
  }

  /**
   * A remap's answer and what the fake switches received meanwhile (from {@code mark} in {@link
   * FakeSwitch#GLOBAL}).
   */
  private record Remapped(PortChange pc, List<Map.Entry<Long, OFMessage>> seq, int mark) {}

  /** With the V3 rules installed, V3 moves to snic0:200 with {@code drainMs}. */
  private Remapped v3RulesThenRemap(OfClient c, long xid, long drainMs) throws Exception {
    v3Rules(c, xid);
    int mark = FakeSwitch.GLOBAL.size();
    PortChange pc = remapV3(drainMs);
    return new Remapped(pc, since(mark), mark);
  }

  private static int firstOf(List<Map.Entry<Long, OFMessage>> seq, Class<?> type) {
    for (int i = 0; i < seq.size(); i++) {
      if (type.isInstance(seq.get(i).getValue())) {
        return i;
      }
    }
    return -1;
  }

  /** Messages of {@code type} to either switch. */
  private static long countAll(List<Map.Entry<Long, OFMessage>> seq, Class<?> type) {
    return count(seq, 0xaL, type) + count(seq, 0xbL, type);
  }

  /**
   * Each switch sent a flow before the first re-pointing answered a barrier after it, before it.
   */
  private static void assertConfirmedBeforeRepointing(List<Map.Entry<Long, OFMessage>> seq) {
    int firstMod = firstOf(seq, OFFlowModifyStrict.class);
    assertTrue(firstMod > 0, names(seq).toString());
    for (long sw : List.of(0xaL, 0xbL)) {
      int lastAdd = lastOf(seq.subList(0, firstMod), sw, OFFlowAdd.class);
      assertTrue(
          lastAdd < 0 || barrierBetween(seq, sw, lastAdd, firstMod),
          "flows on " + sw + " confirmed before any re-pointing: " + names(seq));
    }
  }

  /** The messages the fake switches received since {@code mark}. */
  private static List<Map.Entry<Long, OFMessage>> since(int mark) {
    synchronized (FakeSwitch.GLOBAL) {
      return new ArrayList<>(FakeSwitch.GLOBAL.subList(mark, FakeSwitch.GLOBAL.size()));
    }
  }

  private static long count(List<Map.Entry<Long, OFMessage>> seq, long sw, Class<?> type) {
    return seq.stream().filter(e -> e.getKey() == sw && type.isInstance(e.getValue())).count();
  }

  /**
   * Every barrier sent from {@code mark} on confirms something: the switch was sent a message since
   * its previous barrier (no round trip spent on a switch that has nothing unanswered). What is
   * unanswered is followed from the test's start: a message before the mark (e.g. a late delete of
   * the reconcile after connecting) makes a barrier after it legitimate.
   */
  private void assertBarriersOnlyAfterMessages(int mark) {
    List<Map.Entry<Long, OFMessage>> all = since(start);
    List<Map.Entry<Long, OFMessage>> seq = all.subList(mark - start, all.size());
    Map<Long, Boolean> unanswered = new java.util.HashMap<>();
    for (int i = 0; i < all.size(); i++) {
      Map.Entry<Long, OFMessage> e = all.get(i);
      if (e.getValue().getType() == OFType.BARRIER_REQUEST) {
        assertTrue(
            i < mark - start || unanswered.getOrDefault(e.getKey(), false),
            "barrier on switch " + e.getKey() + " with nothing to confirm: " + names(seq));
        unanswered.put(e.getKey(), false);
      } else {
        unanswered.put(e.getKey(), true);
      }
    }
  }

  private static List<String> names(List<Map.Entry<Long, OFMessage>> seq) {
    return seq.stream()
        .map(
            e ->
                Long.toHexString(e.getKey())
                    + ":"
                    + e.getValue()
                        .getClass()
                        .getSimpleName()
                        .replace("OFFlow", "")
                        .replace("Ver13", ""))
        .toList();
  }

  @Test
  void remapWithDrainWindowIsTwoRoundsAndBarriersOnlyWhatItSent() throws Exception {
    try (OfClient c = client()) {
      Remapped r = v3RulesThenRemap(c, 16, 1000);
      PortChange pc = r.pc();
      List<Map.Entry<Long, OFMessage>> seq = r.seq();
      // The old port drains: nothing is deleted, so there is no break phase and no third round.
      assertEquals(0, countAll(seq, OFFlowDelete.class), names(seq).toString());
      assertEquals(
          List.of("make", "modify"),
          pc.trace().phases().stream().map(p -> p.name()).toList(),
          pc.trace().toString());
      assertBarriersOnlyAfterMessages(r.mark());
      assertConfirmedBeforeRepointing(seq);
      for (long sw : List.of(0xaL, 0xbL)) {
        long barriers =
            seq.stream()
                .filter(e -> e.getKey() == sw && e.getValue().getType() == OFType.BARRIER_REQUEST)
                .count();
        assertTrue(barriers <= 2, "at most one round per phase: " + names(seq));
      }
    }
  }

  @Test
  void preparedRemapOnlyRepointsInOneRound() throws Exception {
    try (OfClient c = client()) {
      v3Rules(c, 17);
      int mark = FakeSwitch.GLOBAL.size();
      PortChange prep =
          onCore(() -> os.core().portChanges().preparePort(3, "snic0", 200, 5000))
              .get(20, TimeUnit.SECONDS);
      List<Map.Entry<Long, OFMessage>> pseq = since(mark);
      assertTrue(count(pseq, 0xbL, OFFlowAdd.class) >= 2, "replica + dispatch: " + names(pseq));
      assertEquals(
          0, countAll(pseq, OFFlowModifyStrict.class) + countAll(pseq, OFFlowDelete.class));
      assertEquals(200, HttpStatus.of(prep));
      assertEquals(
          "host", onCore(() -> os.core().vswitch().ports().get(3).get().sw()), "not moved yet");
      java.util.Set<Long> cookies = new java.util.HashSet<>(snic.flows.keySet());

      mark = FakeSwitch.GLOBAL.size();
      PortChange pc = remapV3(1000);
      List<Map.Entry<Long, OFMessage>> seq = since(mark);
      assertEquals(0, countAll(seq, OFFlowAdd.class) + countAll(seq, OFFlowDelete.class));
      // snic0's sender re-pointed; the host's dispatch of V3's tag from snic0 keeps delivering to
      // the old (draining) port: a frame tagged before the remap (Translator.leftPort).
      assertTrue(count(seq, 0xbL, OFFlowModifyStrict.class) >= 1, "snic0's sender re-pointed");
      assertEquals(
          List.of("modify"),
          pc.trace().phases().stream().map(p -> p.name()).toList(),
          pc.trace().toString());
      assertBarriersOnlyAfterMessages(mark);
      assertTrue(snic.flows.keySet().containsAll(cookies), "the prepared flows are the final ones");
      assertEquals("snic0", onCore(() -> os.core().vswitch().ports().get(3).get().sw()));
      assertTrue(snicHasV3RuleAt200(), "in_port=200 translated on snic0");
    }
  }

  @Test
  void preparedRemapStillWaitsForEarlierUnansweredMessages() throws Exception {
    try (OfClient c = client()) {
      v3Rules(c, 18);
      onCore(() -> os.core().portChanges().preparePort(3, "snic0", 200, 5000))
          .get(20, TimeUnit.SECONDS);
      int mark = FakeSwitch.GLOBAL.size();
      c.send(flow(0, 6, 1, out(2))); // snic0 -> V2 on the host: no barrier from the controller
      waitFor(() -> count(since(mark), 0xbL, OFFlowAdd.class) >= 1);
      remapV3(1000);
      assertConfirmedBeforeRepointing(since(mark)); // the controller's adds, then the modifies
    }
  }

  private static int lastOf(List<Map.Entry<Long, OFMessage>> seq, long sw, Class<?> type) {
    int last = -1;
    for (int i = 0; i < seq.size(); i++) {
      if (seq.get(i).getKey() == sw && type.isInstance(seq.get(i).getValue())) {
        last = i;
      }
    }
    return last;
  }

  private static boolean barrierBetween(
      List<Map.Entry<Long, OFMessage>> seq, long sw, int from, int to) {
    for (int i = from + 1; i < to; i++) {
      if (seq.get(i).getKey() == sw && seq.get(i).getValue().getType() == OFType.BARRIER_REQUEST) {
        return true;
      }
    }
    return false;
  }

  @Test
  void garbageAndBadVersionsGetErrorsConnectionSurvivesStateUnchanged() throws Exception {
    try (OfClient c = client()) {
      c.send(flow(0, 1, 2, out(3)));
      barrier(c, 13);
      Random rnd = new Random(42);
      int errors = 0;
      for (int i = 0; i < 200; i++) {
        int len = 8 + rnd.nextInt(120);
        byte[] b = new byte[len];
        rnd.nextBytes(b);
        b[0] = (byte) (i % 3 == 0 ? 4 : rnd.nextInt(8));
        b[1] = (byte) (i % 2 == 0 ? 14 : rnd.nextInt(40)); // many garbled FLOW_MODs
        if (b[1] == 0 || b[1] == 2 || b[1] == 3 || b[1] == 20 || b[1] == 21) {
          b[1] = 14; // avoid HELLO/ECHO/BARRIER-like frames that legitimately need no error
        }
        b[2] = (byte) (len >> 8);
        b[3] = (byte) len;
        c.raw(b);
      }
      c.send(F.buildEchoRequest().setXid(777).build());
      OFMessage m;
      while ((m = c.read(5000)) != null && !(m.getType() == OFType.ECHO_REPLY)) {
        if (m.getType() == OFType.ERROR) {
          errors++;
        }
      }
      assertNotNull(m, "connection alive: echo answered");
      assertTrue(errors > 0, "errors answered");
      assertEquals(
          1, (int) onCore(() -> os.core().vswitch().rules().size()), "virtual state unchanged");
      // An unknown version after the handshake: BAD_VERSION.
      byte[] v6 = {6, 5, 0, 8, 0, 0, 0, 5};
      c.raw(v6);
      OFMessage e = c.expect(OFType.ERROR, 5, 5000);
      assertEquals(OFBadRequestCode.BAD_VERSION, ((OFBadRequestErrorMsg) e).getCode());
      // A length below 8 loses framing: error then close; OneSwitch keeps serving others.
      c.raw(new byte[] {4, 14, 0, 4, 0, 0, 0, 6});
      assertNotNull(c.expect(OFType.ERROR, 6, 5000));
      assertTrue(c.isClosed());
    }
    try (OfClient c2 = client()) {
      barrier(c2, 14);
    }
  }

  @Test
  void restartRestoresVirtualState() throws Exception {
    try (OfClient c = client()) {
      c.send(flow(0, 10, 1, out(2)));
      barrier(c, 15);
    }
    onCore(
        () -> {
          os.core().state().saveNow();
          return null;
        });
    os.stop();
    os = fx.startWithoutPorts();
    assertEquals(1, (int) onCore(() -> os.core().vswitch().rules().size()));
    assertEquals(
        3, (int) onCore(() -> os.core().vswitch().ports().all().size()), "port map restored");
  }

  /**
   * Whatever a barrier acknowledged survives a stop with no save after it (a crash between the
   * barrier reply and the next state.json write): the journal holds it, including a delete, a
   * modify, a group and a port map change.
   */
  @Test
  void acknowledgedChangesSurviveAStopBeforeTheNextSave() throws Exception {
    try (OfClient c = client()) {
      barrier(c, 14); // the initial state is saved; from here only the journal has the changes
      c.send(
          F.buildGroupAdd()
              .setXid(16)
              .setGroup(OFGroup.of(5))
              .setGroupType(org.projectfloodlight.openflow.protocol.OFGroupType.ALL)
              .setBuckets(List.of(F.buildBucket().setActions(List.of(out(3))).build()))
              .build());
      c.send(flow(0, 10, 1, out(2)));
      c.send(flow(0, 11, 1, out(3)));
      c.send(
          F.buildFlowDeleteStrict()
              .setXid(17)
              .setTableId(TableId.of(0))
              .setPriority(11)
              .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(1)).build())
              .build());
      c.send(flow(1, 12, null, out(2)));
      c.send(
          F.buildFlowModifyStrict()
              .setXid(18)
              .setTableId(TableId.of(1))
              .setPriority(12)
              .setMatch(F.buildMatch().build())
              .setInstructions(List.of(F.instructions().applyActions(List.of(out(3)))))
              .build());
      barrier(c, 19);
      // The barrier reply came once the journal's thread had written what it covers: on disk now.
      Persistence.State disk = new Persistence(dir).load();
      assertEquals(2, disk.flows().size());
      assertEquals(1, disk.groups().size());
    }
    remapV3(0);
    // A REST answer waits for this (RestServer): the remap is on disk once it completes.
    onCore(() -> os.core().durable()).get(10, TimeUnit.SECONDS);
    assertTrue(
        new Persistence(dir)
            .load().ports().stream().anyMatch(p -> p.vport() == 3 && p.sw().equals("snic0")));
    List<String> before = onCore(() -> ruleStrings());
    os.stop(); // no save: only the journal holds the changes since the start
    assertTrue(Files.size(dir.resolve("state.journal")) > 0);
    os = fx.startWithoutPorts();
    assertEquals(before, onCore(() -> ruleStrings()));
    assertEquals(2, (int) onCore(() -> os.core().vswitch().rules().size()));
    assertNotNull(onCore(() -> os.core().vswitch().group(5)));
    assertEquals("snic0", onCore(() -> os.core().vswitch().ports().get(3).orElseThrow().sw()));
  }

  private List<String> ruleStrings() {
    return os.core().vswitch().rules().values().stream()
        .map(r -> r.key() + " " + r.instructions())
        .toList();
  }
}
