package net.uno.oneswitch.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.rest.HttpStatus;
import net.uno.oneswitch.translate.Fixtures;
import net.uno.oneswitch.translate.Translator;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.OFFlowRemoved;
import org.projectfloodlight.openflow.protocol.OFFlowRemovedReason;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/** The pure pieces of the core: removal reports, idle timeouts, selection, refusals, requests. */
class CoreUnitsTest {
  private static final Match IP =
      Fixtures.F.buildMatch().setExact(MatchField.ETH_TYPE, EthType.IPv4).build();

  private static VirtualRule rule(int prio, long cookie, int idle, long installed) {
    return new VirtualRule(
        0,
        prio,
        IP,
        Fixtures.apply(Fixtures.out(2)),
        cookie,
        idle,
        0,
        Set.of(OFFlowModFlags.SEND_FLOW_REM),
        installed);
  }

  @Test
  void aRemovalReportsTheSumOfItsReplicasAndRetiredCountersOnce() {
    AtomicLong clock = new AtomicLong(10_000);
    List<OFFlowRemoved> sent = new ArrayList<>();
    FlowRemovals fr = new FlowRemovals(Fixtures.F, clock::get, sent::add);
    VirtualRule r = rule(5, 0xabc, 0, 7_500);
    // A replica retired while the rule lived on: its counters stay the rule's.
    fr.retiring(11, r.key());
    assertTrue(fr.removed(11, 3, 300, k -> true));
    assertArrayEquals(new long[] {3, 300}, fr.retiredCounters(r.key()));
    FlowRemovals.Removal rm = fr.begin(r, OFFlowRemovedReason.DELETE);
    fr.expect(rm, 21);
    fr.expect(rm, 22);
    fr.retiring(21, r.key()); // a replica being removed is no retired one
    assertTrue(rm.waiting());
    assertTrue(fr.removed(21, 1, 100, k -> true));
    assertTrue(sent.isEmpty());
    assertTrue(fr.removed(22, 2, 200, k -> true));
    assertEquals(1, sent.size());
    OFFlowRemoved m = sent.get(0);
    assertEquals(6, m.getPacketCount().getValue());
    assertEquals(600, m.getByteCount().getValue());
    assertEquals(U64.of(0xabc), m.getCookie());
    assertEquals(2, m.getDurationSec());
    assertEquals(500_000_000, m.getDurationNsec());
    assertEquals(OFFlowRemovedReason.DELETE, m.getReason());
    rm.finish(); // the 3 s safety net after the last replica: nothing more
    assertEquals(1, sent.size());
    assertFalse(fr.removed(99, 1, 1, k -> true), "a flow OneSwitch did not delete");
  }

  @Test
  void aRetiredReplicaOfARuleRemovedSinceAddsNothing() {
    FlowRemovals fr = new FlowRemovals(Fixtures.F, () -> 0, m -> {});
    VirtualRule r = rule(5, 1, 0, 0);
    fr.retiring(11, r.key());
    assertTrue(fr.removed(11, 3, 300, k -> false));
    assertArrayEquals(new long[] {0, 0}, fr.retiredCounters(r.key()));
    fr.retiring(12, r.key());
    fr.removed(12, 1, 1, k -> true);
    fr.forget(r.key());
    assertArrayEquals(new long[] {0, 0}, fr.retiredCounters(r.key()));
  }

  @Test
  void idleTimeoutsCountFromTheLastPollThatSawPackets() {
    IdleTimeouts idle = new IdleTimeouts();
    VirtualRule r = rule(5, 1, 10, 1_000); // idle 10 s, installed at 1 s
    VirtualRule noTimeout = rule(6, 2, 0, 0);
    long[] packets = {0};
    List<VirtualRule> rules = List.of(r, noTimeout);
    assertEquals(List.of(), idle.expired(rules, x -> new long[] {packets[0], 0}, 5_000));
    packets[0] = 4; // traffic seen at the poll of 9 s: idle from then
    assertEquals(List.of(), idle.expired(rules, x -> new long[] {packets[0], 0}, 9_000));
    assertEquals(List.of(), idle.expired(rules, x -> new long[] {packets[0], 0}, 18_999));
    assertEquals(List.of(r), idle.expired(rules, x -> new long[] {packets[0], 0}, 19_000));
    idle.forget(r.key()); // replaced: idle from its install again
    assertEquals(List.of(r), idle.expired(rules, x -> new long[] {packets[0], 0}, 11_000));
  }

  @Test
  void flowModSelectionFollowsStrictAndCookieAndOutPortRules() {
    VirtualRule a = rule(5, 0x10, 0, 0);
    VirtualRule b = rule(6, 0x20, 0, 0);
    List<VirtualRule> rules = List.of(a, b);
    var del =
        Fixtures.F.buildFlowDelete()
            .setTableId(TableId.of(0))
            .setMatch(Fixtures.F.buildMatch().build());
    assertEquals(rules, RuleSelect.forFlowMod(rules, del.build(), 0, false, true));
    assertEquals(List.of(), RuleSelect.forFlowMod(rules, del.build(), 1, false, true));
    assertEquals(
        List.of(b),
        RuleSelect.forFlowMod(
            rules,
            del.setCookie(U64.of(0x20)).setCookieMask(U64.of(0xf0)).build(),
            -1,
            false,
            true));
    var strict =
        Fixtures.F.buildFlowDeleteStrict().setTableId(TableId.of(0)).setMatch(IP).setPriority(5);
    assertEquals(List.of(a), RuleSelect.forFlowMod(rules, strict.build(), 0, true, true));
    assertEquals(
        List.of(),
        RuleSelect.forFlowMod(rules, strict.setOutPort(OFPort.of(3)).build(), 0, true, true));
    assertEquals(
        List.of(a),
        RuleSelect.forFlowMod(rules, strict.setOutPort(OFPort.of(2)).build(), 0, true, true));
    assertTrue(RuleSelect.outputsTo(a, OFPort.ANY, OFGroup.ANY));
    assertFalse(RuleSelect.outputsTo(a, OFPort.ANY, OFGroup.of(7)));
    assertFalse(RuleSelect.usesGroup(a, g -> g == 7));
  }

  @Test
  void aRefusalRollsBackItsMessageOnceAndABarrierForgetsAcceptedOnes() {
    Refusals rf = new Refusals();
    List<String> undone = new ArrayList<>();
    Origin o = new Origin(null, 42, new byte[8]);
    rf.begin(o);
    rf.onUndo(() -> undone.add("first"));
    rf.sent("host", 100);
    rf.onUndo(() -> undone.add("second"));
    rf.sent("snic0", 7);
    rf.end();
    rf.onUndo(() -> undone.add("outside")); // no message being applied: ignored
    rf.sent("host", 101); // not a controller's message
    assertTrue(rf.pending());
    assertNull(rf.refused("host", 101));
    Refusals.Undo u = rf.refused("host", 100);
    assertSame(o, u.origin());
    u.rollBack();
    assertEquals(List.of("second", "first"), undone);
    assertNull(rf.refused("snic0", 7), "one message is rolled back once");
    rf.begin(o);
    rf.sent("host", 200);
    rf.end();
    rf.accepted("host", 201);
    assertNull(rf.refused("host", 200), "barriered: accepted");
    assertFalse(rf.pending());
  }

  @Test
  void portRequestsNameTheFieldTheyRefuse() throws PortError {
    var ports = Fixtures.PORTS;
    assertEquals(
        "port",
        assertThrows(
                PortError.class,
                () -> PortRequests.checkPhysical(Fixtures.TOPO, ports, 9, "host", 1))
            .field()); // a PCIe link port
    PortError taken =
        assertThrows(
            PortError.class,
            () -> PortRequests.checkPhysical(Fixtures.TOPO, ports, 9, "host", 100));
    assertEquals(409, HttpStatus.of(taken));
    PortRequests.checkPhysical(Fixtures.TOPO, ports, 2, "host", 100); // its own port
    assertEquals(
        "switch",
        assertThrows(
                PortError.class,
                () -> PortRequests.checkPhysical(Fixtures.TOPO, ports, 9, "nope", 5))
            .field());
    assertEquals(
        "instances[1]",
        assertThrows(
                PortError.class,
                () ->
                    PortRequests.checkInstances(
                        Fixtures.TOPO,
                        ports,
                        9,
                        List.of(new VPort.Loc("host", 7), new VPort.Loc("host", 7))))
            .field());
    assertEquals(
        "instances[0].port",
        assertThrows(
                PortError.class,
                () ->
                    PortRequests.checkInstances(
                        Fixtures.TOPO, ports, 9, List.of(new VPort.Loc("snic0", 100))))
            .field());
    assertEquals(
        "drain_ms", assertThrows(PortError.class, () -> PortRequests.checkDrainMs(60_001)).field());
    assertEquals("ms", assertThrows(PortError.class, () -> PortRequests.checkPrepareMs(0)).field());
    PortRequests.checkDrainMs(0);
  }

  @Test
  void scaledOutVportsGetAReservedGroupIdUntilTheyHaveOneInstanceAgain() throws Exception {
    ScaleGroupIds ids = new ScaleGroupIds();
    var two = List.of(new VPort.Loc("host", 100), new VPort.Loc("snic0", 5));
    var pm = Fixtures.PORTS.with(VPort.of(2, "vm0", two));
    assertEquals(List.of(2), ids.ensure(pm));
    int id = ids.byVport().get(2);
    assertTrue(Integer.compareUnsigned(id, Translator.SCALE_GROUP_BASE) >= 0);
    assertEquals(List.of(), ids.ensure(pm), "already has one");
    assertThrows(UnsupportedOperationException.class, () -> ids.byVport().clear());
    ids.releaseUnused(pm);
    assertEquals(id, ids.byVport().get(2));
    ids.releaseUnused(Fixtures.PORTS); // back to one instance
    assertTrue(ids.byVport().isEmpty());
  }
}
