package net.uno.oneswitch.it;

import static net.uno.oneswitch.it.Wait.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.http.HttpResponse;
import java.util.List;
import net.uno.oneswitch.Main;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IpProtocol;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.TransportPort;

/**
 * The table offload's REST contract ({@code GET /v1/tables}, {@code PUT /v1/tables/T}) on the real
 * jar code against fake switches: the answer, the errors with their fields, what the switches hold
 * after a move, {@code max_rules}, and the placement kept across a restart.
 */
class TablesRestTest {
  private static final OFFactory F = FakeSwitch.F;
  private TwoSwitches fx;
  private FakeSwitch host;
  private FakeSwitch snic;
  private Main.Running os;

  private void up(String snicExtra) throws Exception {
    fx = TwoSwitches.options().wireName("wire0").snicExtra(snicExtra).create();
    host = fx.host;
    snic = fx.snic;
    start();
  }

  private void start() throws Exception {
    os = fx.start();
  }

  @AfterEach
  void down() throws Exception {
    if (fx != null) {
      fx.close();
    }
  }

  private HttpResponse<String> call(String method, String path, String body) throws Exception {
    return fx.call(method, path, body);
  }

  private static JsonNode json(HttpResponse<String> r) throws Exception {
    return TwoSwitches.json(r);
  }

  private void assertError(HttpResponse<String> r, int status, String field) throws Exception {
    assertEquals(status, r.statusCode(), r.body());
    assertEquals(field, json(r).get("field").asText(), r.body());
  }

  private static OFFlowMod add(int xid, int table, int prio, Match m, List<OFInstruction> ins) {
    return F.buildFlowAdd()
        .setXid(xid)
        .setTableId(TableId.of(table))
        .setPriority(prio)
        .setMatch(m)
        .setInstructions(ins)
        .build();
  }

  /** A filter table 0 (drops UDP 53..53+n-1, goes on) and a forwarding table 1. */
  private void rules(int filters) throws Exception {
    try (OfClient c = new OfClient(os.ofPort())) {
      c.send(F.buildHello().setXid(1).build());
      assertNotNull(c.expect(OFType.HELLO, -1, 5000));
      int xid = 10;
      for (int i = 0; i < filters; i++) {
        Match m =
            F.buildMatch()
                .setExact(MatchField.ETH_TYPE, EthType.IPv4)
                .setExact(MatchField.IP_PROTO, IpProtocol.UDP)
                .setExact(MatchField.UDP_DST, TransportPort.of(53 + i))
                .build();
        c.send(add(xid++, 0, 100, m, List.of()));
      }
      c.send(
          add(
              xid++,
              0,
              1,
              F.buildMatch().build(),
              List.of(F.instructions().gotoTable(TableId.of(1)))));
      for (int[] io : new int[][] {{1, 2}, {2, 1}}) {
        c.send(
            add(
                xid++,
                1,
                10,
                F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(io[0])).build(),
                List.of(
                    F.instructions()
                        .applyActions(List.of(F.actions().output(OFPort.of(io[1]), 0xffff))))));
      }
      c.send(F.buildBarrierRequest().setXid(999).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 999, 10000));
    }
  }

  /** The flows OneSwitch holds on {@code sw} in physical table {@code t}. */
  private static long flowsIn(FakeSwitch sw, int t) {
    return sw.flows.values().stream().filter(f -> f.getTableId().getValue() == t).count();
  }

  @Test
  void tablesContract() throws Exception {
    up("");
    assertEquals(0, json(call("GET", "/v1/tables", null)).size());
    rules(3);
    JsonNode ts = json(call("GET", "/v1/tables", null));
    assertEquals(2, ts.size(), ts.toString());
    JsonNode t0 = ts.get(0);
    assertEquals(0, t0.get("table").asInt());
    assertEquals("everywhere", t0.get("location").asText());
    assertEquals(4, t0.get("rules").asInt());
    assertEquals(4, t0.get("physical").get("host").asInt(), t0.toString());
    assertEquals(4, t0.get("physical").get("snic0").asInt(), t0.toString());
    assertTrue(t0.get("offload").has("snic0") && t0.get("offload").get("snic0").isNull());
    assertEquals(5, flowsIn(host, 1) + 1, "host table 1: 4 rules");

    HttpResponse<String> r = call("PUT", "/v1/tables/0", "{\"location\": \"snic0\"}");
    assertEquals(200, r.statusCode(), r.body());
    JsonNode b = json(r);
    assertEquals(0, b.get("table").asInt());
    assertEquals("everywhere", b.get("from").asText());
    assertEquals("snic0", b.get("to").asText());
    assertEquals(4, b.get("rules").asInt());
    assertTrue(b.get("ms").asDouble() > 0);
    List<String> phases = new java.util.ArrayList<>();
    b.get("phases").forEach(p -> phases.add(p.get("phase").asText()));
    assertEquals(List.of("make", "modify", "break"), phases, b.toString());
    // The host's physical table 1 holds only the handoff rules of its one port and of CONTROLLER
    // (packet-outs' pipelines run on the host) now.
    long deadline = System.currentTimeMillis() + 5000;
    while (flowsIn(host, 1) != 2 && System.currentTimeMillis() < deadline) {
      Thread.sleep(20);
    }
    assertEquals(2, flowsIn(host, 1), host.flows.values().toString());
    JsonNode after = json(call("GET", "/v1/tables", null)).get(0);
    assertEquals("snic0", after.get("location").asText());
    assertEquals(4, after.get("physical").get("snic0").asInt());
    assertTrue(after.get("physical").get("host") == null, after.toString());

    r = call("PUT", "/v1/tables/0", "{\"location\": \"snic0\"}");
    assertEquals(200, r.statusCode());
    assertEquals(0, json(r).get("phases").size(), "the same location: nothing to do");

    // Errors name their field and change nothing.
    assertError(call("PUT", "/v1/tables/x", "{\"location\": \"host\"}"), 400, "table");
    assertError(call("PUT", "/v1/tables/254", "{\"location\": \"host\"}"), 400, "table");
    assertError(call("PUT", "/v1/tables/252", "{\"location\": \"host\"}"), 400, "table");
    assertError(call("PUT", "/v1/tables/0", "{\"location\": \"snic9\"}"), 400, "location");
    assertError(call("PUT", "/v1/tables/0", "{\"location\": 3}"), 400, "location");
    assertError(call("PUT", "/v1/tables/0", "{}"), 400, "location");
    assertError(call("PUT", "/v1/tables/0", "{\"location\": \"host\", \"x\": 1}"), 400, "x");
    assertError(
        call("PUT", "/v1/tables/0", "{\"location\": \"host\", \"drain_ms\": -1}"), 400, "drain_ms");
    assertError(call("PUT", "/v1/tables/0", "[1]"), 400, "body");
    assertEquals(405, call("GET", "/v1/tables/0", null).statusCode());
    assertEquals(405, call("POST", "/v1/tables", "{}").statusCode());
    assertEquals("snic0", json(call("GET", "/v1/tables", null)).get(0).get("location").asText());

    // A rule the offload of table 1 cannot carry: refused, with the rule named.
    try (OfClient c = new OfClient(os.ofPort())) {
      c.send(F.buildHello().setXid(1).build());
      assertNotNull(c.expect(OFType.HELLO, -1, 5000));
      c.send(
          add(
              20,
              0,
              50,
              F.buildMatch().setExact(MatchField.ETH_TYPE, EthType.ARP).build(),
              List.of(
                  F.instructions()
                      .writeActions(
                          List.of(
                              F.actions()
                                  .setField(
                                      F.oxms()
                                          .ethDst(
                                              org.projectfloodlight.openflow.types.MacAddress.of(
                                                  2L))))),
                  F.instructions().gotoTable(TableId.of(1)))));
      c.send(F.buildBarrierRequest().setXid(21).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 21, 10000));
    }
    int before = host.flows.size() + snic.flows.size();
    r = call("PUT", "/v1/tables/1", "{\"location\": \"snic0\"}");
    assertError(r, 409, "location");
    assertTrue(json(r).get("error").asText().contains("priority=50"), r.body());
    assertEquals(before, host.flows.size() + snic.flows.size(), "nothing changed");
    JsonNode t1 = json(call("GET", "/v1/tables", null)).get(1);
    assertTrue(t1.get("offload").get("snic0").asText().contains("action set"), t1.toString());

    // Back to the host, then a restart keeps the placement.
    r = call("PUT", "/v1/tables/0", "{\"location\": \"host\", \"drain_ms\": 50}");
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("host", json(r).get("to").asText());
    os.stop();
    start();
    assertEquals("host", json(call("GET", "/v1/tables", null)).get(0).get("location").asText());
    r = call("PUT", "/v1/tables/0", "{\"location\": \"everywhere\"}");
    assertEquals(200, r.statusCode(), r.body());

    // A split: the host keeps the filters (priority 100) above its handoff, snic0 the whole table.
    assertError(
        call("PUT", "/v1/tables/0", "{\"location\": \"snic0\", \"host_min_priority\": 0}"),
        400,
        "host_min_priority");
    assertError(
        call("PUT", "/v1/tables/0", "{\"location\": \"snic0\", \"host_min_priority\": \"x\"}"),
        400,
        "host_min_priority");
    assertError(
        call("PUT", "/v1/tables/0", "{\"location\": \"host\", \"host_min_priority\": 5}"),
        400,
        "host_min_priority");
    assertError(
        call("PUT", "/v1/tables/0", "{\"location\": \"everywhere\", \"host_min_priority\": 5}"),
        400,
        "host_min_priority");
    r =
        call(
            "PUT",
            "/v1/tables/0",
            "{\"location\": \"snic0\", \"host_min_priority\": 100, \"drain_ms\": 0}");
    assertEquals(200, r.statusCode(), r.body());
    JsonNode split = json(call("GET", "/v1/tables", null)).get(0);
    assertEquals("snic0", split.get("location").asText(), split.toString());
    assertEquals(100, split.get("host_min_priority").asInt(), split.toString());
    assertTrue(json(call("GET", "/v1/tables", null)).get(1).get("host_min_priority").isNull());
    waitFor(
        () ->
            host.flows.values().stream()
                .filter(f -> f.getTableId().getValue() == 1)
                .map(f -> f.getPriority())
                .collect(java.util.stream.Collectors.toSet())
                .equals(java.util.Set.of(100, 0)));
    os.stop();
    start();
    split = json(call("GET", "/v1/tables", null)).get(0);
    assertEquals(100, split.get("host_min_priority").asInt(), "kept across a restart");
    r = call("PUT", "/v1/tables/0", "{\"location\": \"everywhere\", \"drain_ms\": 0}");
    assertEquals(200, r.statusCode(), r.body());
    assertTrue(json(call("GET", "/v1/tables", null)).get(0).get("host_min_priority").isNull());
  }

  /** {lookups, matches} of virtual table {@code t} in OneSwitch's TABLE statistics. */
  private long[] tableStats(int t) throws Exception {
    try (OfClient c = new OfClient(os.ofPort())) {
      c.send(F.buildHello().setXid(1).build());
      assertNotNull(c.expect(OFType.HELLO, -1, 5000));
      c.send(F.buildTableStatsRequest().setXid(7).build());
      var r =
          (org.projectfloodlight.openflow.protocol.OFTableStatsReply)
              c.expect(OFType.STATS_REPLY, 7, 5000);
      assertNotNull(r, "TABLE stats reply");
      for (var e : r.getEntries()) {
        if (e.getTableId().getValue() == t) {
          return new long[] {e.getLookupCount().getValue(), e.getMatchedCount().getValue()};
        }
      }
      throw new AssertionError("no table " + t + " in " + r);
    }
  }

  /**
   * TABLE statistics stay the merged truth across a move: the handoff rules a move deletes report
   * their packets (FLOW_REMOVED), which the switches' table counters keep counting, so the packets
   * they handed off before the move stay counted once, not twice.
   */
  @Test
  void tableStatsCountHandedOffPacketsOnceAcrossAMove() throws Exception {
    up("");
    rules(1);
    assertEquals(200, call("PUT", "/v1/tables/0", "{\"location\": \"snic0\"}").statusCode());
    waitFor(() -> flowsIn(host, 1) == 2);
    // The host's 2 handoff rules handed off 10 packets each (the fake's flow counters), looked up
    // in its physical table 1 and again in snic0's, which also looked up 30 of the wire's.
    host.tableStats.put(1, new long[] {20, 20});
    snic.tableStats.put(1, new long[] {50, 50});
    assertEquals(List.of(50L, 50L), List.of(tableStats(0)[0], tableStats(0)[1]), "before");
    HttpResponse<String> r =
        call("PUT", "/v1/tables/0", "{\"location\": \"everywhere\", \"drain_ms\": 0}");
    assertEquals(200, r.statusCode(), r.body());
    waitFor(
        () ->
            host.flows.values().stream()
                .noneMatch(f -> f.getTableId().getValue() == 1 && f.getPriority() == 0xffff));
    assertEquals(
        List.of(50L, 50L),
        List.of(tableStats(0)[0], tableStats(0)[1]),
        "after: the deleted handoff rules' 20 packets still taken out");
  }

  @Test
  void aTableTheSnicCannotHoldIsRefused() throws Exception {
    up(", \"max_rules\": 12");
    // On the host only, its 21 rules do not count against snic0's limit.
    assertEquals(200, call("PUT", "/v1/tables/0", "{\"location\": \"host\"}").statusCode());
    rules(20);
    assertEquals(21, json(call("GET", "/v1/tables", null)).get(0).get("rules").asInt());
    int before = snic.flows.size();
    for (String to : List.of("snic0", "everywhere")) {
      HttpResponse<String> r = call("PUT", "/v1/tables/0", "{\"location\": \"" + to + "\"}");
      assertError(r, 409, "location");
      assertTrue(json(r).get("error").asText().contains("max_rules 12"), r.body());
      assertEquals(before, snic.flows.size(), "never half installed");
    }
    JsonNode t0 = json(call("GET", "/v1/tables", null)).get(0);
    assertEquals("host", t0.get("location").asText());
    assertTrue(t0.get("offload").get("snic0").asText().contains("max_rules"), t0.toString());
    // A flow-mod that would go beyond the limit (a wildcard rule is replicated on snic0) is
    // refused with TABLE_FULL.
    try (OfClient c = new OfClient(os.ofPort())) {
      c.send(F.buildHello().setXid(1).build());
      assertNotNull(c.expect(OFType.HELLO, -1, 5000));
      for (int i = 0; i < 12; i++) {
        c.send(
            add(
                100 + i,
                2,
                10 + i,
                F.buildMatch().setExact(MatchField.ETH_TYPE, EthType.of(0x9000 + i)).build(),
                List.of()));
      }
      org.projectfloodlight.openflow.protocol.OFErrorMsg err =
          (org.projectfloodlight.openflow.protocol.OFErrorMsg) c.expect(OFType.ERROR, -1, 5000);
      assertNotNull(err, "refused");
      assertEquals(
          org.projectfloodlight.openflow.protocol.OFErrorType.FLOW_MOD_FAILED, err.getErrType());
    }
    long deadline = System.currentTimeMillis() + 2000;
    while (System.currentTimeMillis() < deadline) {
      Thread.sleep(50);
    }
    assertTrue(snic.flows.size() <= 12, "snic0 holds " + snic.flows.size());
  }
}
