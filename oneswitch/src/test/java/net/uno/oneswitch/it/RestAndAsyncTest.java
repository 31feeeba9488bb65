package net.uno.oneswitch.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.Main;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.OFFlowRemoved;
import org.projectfloodlight.openflow.protocol.OFFlowRemovedReason;
import org.projectfloodlight.openflow.protocol.OFGroupModify;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.projectfloodlight.openflow.protocol.OFPortStatus;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/** The REST contract (with a token) and OneSwitch's own async messages, on fake switches. */
class RestAndAsyncTest {
  private static final OFFactory F = FakeSwitch.F;
  private TwoSwitches fx;
  private FakeSwitch host;
  private FakeSwitch snic;
  private Main.Running os;

  @BeforeEach
  void up() throws Exception {
    fx = TwoSwitches.options().token("s3cret-t0ken").create();
    host = fx.host;
    snic = fx.snic;
    start();
  }

  private void start() throws Exception {
    os = fx.start();
  }

  @AfterEach
  void down() throws Exception {
    fx.close();
  }

  private HttpResponse<String> call(String method, String path, String body, boolean auth)
      throws Exception {
    return fx.call(method, path, body, auth);
  }

  private HttpResponse<String> get(String path, boolean auth) throws Exception {
    return call("GET", path, null, auth);
  }

  private static JsonNode json(HttpResponse<String> r) throws Exception {
    return TwoSwitches.json(r);
  }

  private OfClient client() throws Exception {
    OfClient c = fx.client();
    c.send(F.buildBarrierRequest().setXid(2).build());
    assertNotNull(c.expect(OFType.BARRIER_REPLY, 2, 5000)); // session registered
    return c;
  }

  @Test
  void restContract() throws Exception {
    assertEquals(401, get("/v1/ports", false).statusCode());
    assertEquals("Authorization", json(get("/v1/ports", false)).get("field").asText());
    assertEquals(404, get("/v1/nope", true).statusCode());
    assertEquals(405, call("POST", "/v1/ports", "{}", true).statusCode());
    JsonNode sws = json(get("/v1/switches", true));
    assertEquals("host", sws.get(0).get("id").asText());
    assertTrue(sws.get(0).get("connected").asBoolean());
    assertTrue(sws.get(0).get("ports").get(0).get("port").isIntegralNumber());
    assertEquals(2, json(get("/v1/ports", true)).size());
    try (OfClient c = client()) {
      String body = "{\"switch\": \"snic0\", \"port\": 200, \"name\": \"nf1\"}";
      HttpResponse<String> r = call("PUT", "/v1/ports/5", body, true);
      assertEquals(201, r.statusCode(), r.body());
      OFPortStatus ps = (OFPortStatus) c.expect(OFType.PORT_STATUS, -1, 5000);
      assertEquals(OFPortReason.ADD, ps.getReason());
      assertEquals(OFPort.of(5), ps.getDesc().getPortNo());
      assertEquals(200, call("PUT", "/v1/ports/5", body, true).statusCode(), "idempotent");
      HttpResponse<String> moved =
          call("PUT", "/v1/ports/5", "{\"switch\": \"host\", \"port\": 101}", true);
      assertEquals(409, moved.statusCode());
      HttpResponse<String> unknown =
          call("PUT", "/v1/ports/6", "{\"switch\": \"nope\", \"port\": 3}", true);
      assertEquals(400, unknown.statusCode());
      assertEquals("switch", json(unknown).get("field").asText());
      assertEquals(
          "port",
          json(call("PUT", "/v1/ports/6", "{\"switch\": \"host\", \"port\": 1}", true))
              .get("field")
              .asText(),
          "PCIe port refused");
      assertEquals(
          "colour",
          json(call(
                  "PUT", "/v1/ports/6", "{\"switch\": \"host\", \"port\": 3, \"colour\": 1}", true))
              .get("field")
              .asText());
      assertEquals("vport", json(call("PUT", "/v1/ports/abc", "{}", true)).get("field").asText());
      assertEquals(400, call("PUT", "/v1/ports/6", "not json", true).statusCode());
      JsonNode rm =
          json(call("POST", "/v1/ports/5/remap", "{\"switch\": \"host\", \"port\": 101}", true));
      assertEquals(5, rm.get("vport").asInt());
      assertEquals("snic0", rm.get("from").get("switch").asText());
      assertEquals(101, rm.get("to").get("port").asInt());
      assertTrue(rm.has("rules") && rm.has("duration_ms"));
      assertEquals(200, call("DELETE", "/v1/ports/5", null, true).statusCode());
      assertEquals(404, call("DELETE", "/v1/ports/5", null, true).statusCode());
      OFPortStatus del;
      do {
        del = (OFPortStatus) c.expect(OFType.PORT_STATUS, -1, 5000);
      } while (del != null && del.getReason() != OFPortReason.DELETE);
      assertNotNull(del);
    }
    String metrics = get("/metrics", true).body();
    assertTrue(metrics.contains("oneswitch_remaps_total 1"), metrics);
    assertTrue(metrics.contains("oneswitch_flow_mod_latency_seconds_count"));
  }

  private static OFFlowAdd flow(int prio, int hardTimeout) {
    return F.buildFlowAdd()
        .setXid(40)
        .setTableId(TableId.of(0))
        .setPriority(prio)
        .setMatch(F.buildMatch().build())
        .setHardTimeout(hardTimeout)
        .setCookie(U64.of(0xc0ffee))
        .setFlags(Set.of(OFFlowModFlags.SEND_FLOW_REM))
        .setInstructions(
            List.of(
                F.instructions().applyActions(List.of(F.actions().output(OFPort.of(2), 0xffff)))))
        .build();
  }

  @Test
  void flowRemovedCarriesSummedReplicaCountersAndHardTimeoutExpires() throws Exception {
    try (OfClient c = client()) {
      c.send(flow(9, 0)); // wildcard in_port: one replica per switch
      c.send(F.buildBarrierRequest().setXid(41).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 41, 5000));
      c.send(
          F.buildFlowDeleteStrict()
              .setXid(42)
              .setTableId(TableId.of(0))
              .setPriority(9)
              .setMatch(F.buildMatch().build())
              .setOutPort(OFPort.ANY)
              .setOutGroup(OFGroup.ANY)
              .build());
      OFFlowRemoved fr = (OFFlowRemoved) c.expect(OFType.FLOW_REMOVED, -1, 10000);
      assertNotNull(fr);
      assertEquals(OFFlowRemovedReason.DELETE, fr.getReason());
      assertEquals(0xc0ffeeL, fr.getCookie().getValue());
      assertEquals(20, fr.getPacketCount().getValue(), "10 per replica, 2 replicas");
      assertEquals(2000, fr.getByteCount().getValue());

      c.send(flow(8, 1));
      OFFlowRemoved hard = (OFFlowRemoved) c.expect(OFType.FLOW_REMOVED, -1, 10000);
      assertNotNull(hard);
      assertEquals(OFFlowRemovedReason.HARD_TIMEOUT, hard.getReason());
      assertEquals(8, hard.getPriority());
      assertEquals(
          0,
          (int)
              os.core()
                  .exec()
                  .submit(() -> os.core().vswitch().rules().size())
                  .get(5, TimeUnit.SECONDS));
    }
  }

  private HttpResponse<String> inst(int vport, String instances) throws Exception {
    return call(
        "PUT", "/v1/ports/" + vport + "/instances", "{\"instances\": " + instances + "}", true);
  }

  private static String field(HttpResponse<String> r) throws Exception {
    return r.statusCode() + " " + json(r).path("field").asText();
  }

  private static OFFlowAdd fromTo(int in, int outPort, boolean wildcard) {
    var m = F.buildMatch();
    if (!wildcard) {
      m.setExact(org.projectfloodlight.openflow.protocol.match.MatchField.IN_PORT, OFPort.of(in));
    }
    return F.buildFlowAdd()
        .setXid(60 + in)
        .setTableId(TableId.of(0))
        .setPriority(wildcard ? 5 : 10)
        .setMatch(m.build())
        .setInstructions(
            List.of(
                F.instructions()
                    .applyActions(List.of(F.actions().output(OFPort.of(outPort), 0xffff)))))
        .build();
  }

  private boolean dispatches(FakeSwitch sw, int port) {
    return sw.flows.values().stream()
        .anyMatch(
            fm ->
                fm.getTableId().getValue() == 0
                    && OFPort.of(port)
                        .equals(
                            fm.getMatch()
                                .get(
                                    org.projectfloodlight.openflow.protocol.match.MatchField
                                        .IN_PORT)));
  }

  @Test
  void drainWindowFieldsListingAndExpiry() throws Exception {
    mapV5AtSnic0();
    for (String bad : List.of("-1", "60001", "1.5", "\"2\"", "true")) {
      HttpResponse<String> r =
          call(
              "POST",
              "/v1/ports/5/remap",
              "{\"switch\": \"host\", \"port\": 101, \"drain_ms\": " + bad + "}",
              true);
      assertEquals("400 drain_ms", field(r), bad);
      assertEquals(
          "400 drain_ms",
          field(
              call(
                  "PUT",
                  "/v1/ports/5/instances",
                  "{\"instances\": [{\"switch\": \"host\", \"port\": 101}], \"drain_ms\": "
                      + bad
                      + "}",
                  true)),
          bad);
    }
    assertEquals("snic0", json(get("/v1/ports", true)).get(2).get("switch").asText(), "unchanged");
    long t0 = System.currentTimeMillis();
    HttpResponse<String> rm =
        call(
            "POST",
            "/v1/ports/5/remap",
            "{\"switch\": \"host\", \"port\": 101, \"drain_ms\": 1500}",
            true);
    assertEquals(200, rm.statusCode(), rm.body());
    JsonNode p5 = json(get("/v1/ports", true)).get(2);
    assertEquals(1, p5.get("draining").size(), p5.toString());
    assertEquals("snic0", p5.get("draining").get(0).get("switch").asText());
    assertEquals(200, p5.get("draining").get(0).get("port").asInt());
    long until = p5.get("draining").get(0).get("until_ms").asLong();
    assertTrue(until >= t0 + 1500 && until <= System.currentTimeMillis() + 1500, p5.toString());
    assertTrue(dispatches(snic, 200), "the old port still enters the pipeline");
    assertTrue(dispatches(host, 101));
    awaitEnded("draining", "the drain never ended");
    // drain_ms 0: the old port is gone at once; the instances call takes the field too.
    assertEquals(
        200,
        call(
                "POST",
                "/v1/ports/5/remap",
                "{\"switch\": \"snic0\", \"port\": 200, \"drain_ms\": 0}",
                true)
            .statusCode());
    assertEquals(0, json(get("/v1/ports", true)).get(2).get("draining").size());
    assertEquals(
        200,
        call(
                "PUT",
                "/v1/ports/5/instances",
                "{\"instances\": [{\"switch\": \"host\", \"port\": 101}], \"drain_ms\": 60000}",
                true)
            .statusCode());
    assertEquals(1, json(get("/v1/ports", true)).get(2).get("draining").size());
    // Mapping another vport onto the draining port ends the drain: no 409.
    assertEquals(
        201,
        call("PUT", "/v1/ports/6", "{\"switch\": \"snic0\", \"port\": 200}", true).statusCode());
    assertEquals(0, json(get("/v1/ports", true)).get(2).get("draining").size());
  }

  @Test
  void prepareContractListingRemapAndExpiry() throws Exception {
    mapV5AtSnic0();
    String ok = "{\"switch\": \"host\", \"port\": 101";
    for (String bad : List.of("0", "-1", "60001", "1.5", "\"2\"", "true")) {
      assertEquals("400 ms", field(prepare(5, ok + ", \"ms\": " + bad + "}")), bad);
    }
    assertEquals("404 vport", field(prepare(9, ok + "}")), "the vport must be mapped");
    assertEquals("400 switch", field(prepare(5, "{\"switch\": \"nope\", \"port\": 3}")));
    assertEquals("400 port", field(prepare(5, "{\"switch\": \"host\", \"port\": 1}")), "PCIe");
    assertEquals("409 port", field(prepare(5, "{\"switch\": \"host\", \"port\": 100}")));
    assertEquals("400 port", field(prepare(5, "{\"switch\": \"host\"}")), "port required");
    assertEquals("400 colour", field(prepare(5, ok + ", \"colour\": 1}")));
    assertEquals(405, call("GET", "/v1/ports/5/prepare", null, true).statusCode());
    assertEquals(0, json(get("/v1/ports", true)).get(2).get("prepared").size(), "nothing changed");
    assertTrue(!dispatches(host, 101), "nothing installed by a refused prepare");

    long t0 = System.currentTimeMillis();
    HttpResponse<String> r = prepare(5, ok + ", \"ms\": 1500}");
    assertEquals(200, r.statusCode(), r.body());
    JsonNode a = json(r);
    assertEquals(5, a.get("vport").asInt());
    assertEquals("host", a.get("switch").asText());
    assertEquals(101, a.get("port").asInt());
    long until = a.get("until_ms").asLong();
    assertTrue(until >= t0 + 1500 && until <= System.currentTimeMillis() + 1500, a.toString());
    assertTrue(a.has("rules") && a.has("duration_ms") && a.has("plan_ms"), a.toString());
    assertTrue(a.get("phases").size() >= 1, "the prepared port's entry was installed: " + a);
    JsonNode p5 = json(get("/v1/ports", true)).get(2);
    assertEquals(1, p5.get("prepared").size(), p5.toString());
    assertEquals(0, p5.get("draining").size(), p5.toString());
    assertEquals("snic0", p5.get("switch").asText(), "still served where it was");
    assertTrue(dispatches(host, 101), "frames from the prepared port enter the pipeline");
    // The remap to the prepared port finds its entry in place: no new flow, the make phase empty.
    HttpResponse<String> rm =
        call(
            "POST",
            "/v1/ports/5/remap",
            "{\"switch\": \"host\", \"port\": 101, \"drain_ms\": 0}",
            true);
    assertEquals(200, rm.statusCode(), rm.body());
    for (JsonNode ph : json(rm).get("phases")) {
      assertTrue(!ph.get("phase").asText().equals("make"), "no make phase: " + rm.body());
    }
    p5 = json(get("/v1/ports", true)).get(2);
    assertEquals("host", p5.get("switch").asText());
    assertEquals(0, p5.get("prepared").size(), "mapping the port ends its window: " + p5);
    // Preparing a port the vport already uses changes nothing; a prepare not followed by a remap
    // expires like a drain.
    JsonNode same = json(prepare(5, ok + "}"));
    assertEquals(0, same.get("rules").asInt(), same.toString());
    assertEquals(
        200, prepare(5, "{\"switch\": \"snic0\", \"port\": 200, \"ms\": 300}").statusCode());
    assertTrue(dispatches(snic, 200));
    awaitEnded("prepared", "the prepared port never expired");
  }

  /** Maps vport 5 to snic0:200 (201). */
  private void mapV5AtSnic0() throws Exception {
    assertEquals(
        201,
        call("PUT", "/v1/ports/5", "{\"switch\": \"snic0\", \"port\": 200}", true).statusCode());
  }

  /**
   * Waits until vport 5 lists no {@code kind} ("draining"/"prepared") port and snic0:200 is gone.
   */
  private void awaitEnded(String kind, String failure) throws Exception {
    long end = System.currentTimeMillis() + 15_000;
    while (json(get("/v1/ports", true)).get(2).get(kind).size() > 0 || dispatches(snic, 200)) {
      assertTrue(System.currentTimeMillis() < end, failure);
      Thread.sleep(100);
    }
  }

  private HttpResponse<String> prepare(int vport, String body) throws Exception {
    return call("POST", "/v1/ports/" + vport + "/prepare", body, true);
  }

  private HttpResponse<String> weighted(String instances, String weights) throws Exception {
    return call(
        "PUT",
        "/v1/ports/5/instances",
        "{\"instances\": " + instances + ", \"weights\": " + weights + "}",
        true);
  }

  @Test
  void weightsAreValidatedAndAWeightsOnlyChangeModifiesTheGroupInPlace() throws Exception {
    mapV5AtSnic0();
    String two = "[{\"switch\": \"snic0\", \"port\": 200}, {\"switch\": \"host\", \"port\": 101}]";
    try (OfClient c = client()) {
      c.send(fromTo(2, 5, false));
      c.send(F.buildBarrierRequest().setXid(80).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 80, 5000));
      assertEquals(200, inst(5, two).statusCode());
      assertEquals(
          OFPortReason.MODIFY, ((OFPortStatus) c.expect(OFType.PORT_STATUS, -1, 5000)).getReason());
      String before = get("/v1/ports", true).body();
      for (String bad :
          List.of(
              "[1]", "[1, 2, 3]", "[0, 5]", "[1, 65536]", "[1, \"2\"]", "[1.5, 2]", "{}", "7")) {
        assertEquals("400 weights", field(weighted(two, bad)), bad);
      }
      assertEquals(before, get("/v1/ports", true).body(), "a refused body changes nothing");
      int gid =
          os.core()
              .exec()
              .submit(() -> os.core().planner().scaleGroups().get(5))
              .get(5, TimeUnit.SECONDS);
      int mods = host.logSnapshot().size();
      HttpResponse<String> r = weighted(two, "[100, 300]");
      assertEquals(200, r.statusCode(), r.body());
      assertEquals("[100,300]", json(r).get("weights").toString());
      // Only the group changed: a GROUP_MOD with the weights, no flow mod, no PORT_STATUS.
      List<OFMessage> sent = host.logSnapshot().subList(mods, host.logSnapshot().size());
      assertTrue(
          sent.stream()
              .anyMatch(
                  m ->
                      m instanceof OFGroupModify g
                          && g.getGroup().getGroupNumber() == gid
                          && g.getBuckets().stream()
                              .map(b -> b.getWeight())
                              .toList()
                              .equals(List.of(100, 300))),
          sent.toString());
      assertTrue(sent.stream().noneMatch(m -> m.getType() == OFType.FLOW_MOD), sent.toString());
      assertNull(c.expect(OFType.PORT_STATUS, -1, 300), "the port did not change");
    }
    JsonNode v5 = null;
    for (JsonNode p : json(get("/v1/ports", true))) {
      if (p.get("vport").asInt() == 5) {
        v5 = p;
      }
    }
    assertNotNull(v5);
    assertEquals("[100,300]", v5.get("weights").toString());
    assertEquals("[]", v5.get("draining").toString(), "a weights change drains nothing");
    // Persisted; an instances change without weights resets them to equal.
    os.core().exec().submit(os.core().state()::saveNow).get(5, TimeUnit.SECONDS);
    os.stop();
    start();
    assertTrue(get("/v1/ports", true).body().contains("\"weights\":[100,300]"));
    HttpResponse<String> reset = inst(5, two);
    assertEquals(200, reset.statusCode(), reset.body());
    assertEquals("[1,1]", json(reset).get("weights").toString());
  }

  @Test
  void instancesContractValidationGroupIdsAndPersistence() throws Exception {
    mapV5AtSnic0();
    String two = "[{\"switch\": \"snic0\", \"port\": 200}, {\"switch\": \"host\", \"port\": 101}]";
    assertEquals("404 vport", field(inst(9, two)), "the vport must be mapped");
    assertEquals("400 instances", field(call("PUT", "/v1/ports/5/instances", "{}", true)));
    assertEquals("400 instances", field(inst(5, "[]")));
    assertEquals("400 instances", field(inst(5, "{}")));
    StringBuilder many = new StringBuilder("[");
    for (int i = 0; i < 17; i++) {
      many.append(i == 0 ? "" : ",")
          .append("{\"switch\": \"host\", \"port\": ")
          .append(300 + i)
          .append("}");
    }
    assertEquals("400 instances", field(inst(5, many + "]")), "at most 16");
    assertEquals(
        "400 extra",
        field(
            call(
                "PUT",
                "/v1/ports/5/instances",
                "{\"instances\": " + two + ", \"extra\": 1}",
                true)));
    assertEquals("400 instances[0]", field(inst(5, "[3]")));
    assertEquals(
        "400 instances[0].switch", field(inst(5, "[{\"switch\": \"nope\", \"port\": 3}]")));
    assertEquals("400 instances[0].switch", field(inst(5, "[{\"port\": 3}]")));
    assertEquals("400 instances[0].port", field(inst(5, "[{\"switch\": \"host\", \"port\": 0}]")));
    assertEquals(
        "400 instances[0].colour",
        field(inst(5, "[{\"switch\": \"host\", \"port\": 3, \"colour\": 1}]")));
    assertEquals(
        "400 instances[1].port",
        field(
            inst(
                5,
                "[{\"switch\": \"snic0\", \"port\": 200}, {\"switch\": \"host\", \"port\": 1}]")),
        "a PCIe port");
    assertEquals(
        "409 instances[1].port",
        field(
            inst(
                5,
                "[{\"switch\": \"snic0\", \"port\": 200}, {\"switch\": \"host\", \"port\": 100}]")),
        "mapped to vport 2");
    assertEquals(
        "400 instances[1]",
        field(
            inst(
                5,
                "[{\"switch\": \"host\", \"port\": 101}, {\"switch\": \"host\", \"port\": 101}]")),
        "duplicate");
    assertEquals(405, call("POST", "/v1/ports/5/instances", "{}", true).statusCode());
    try (OfClient c = client()) {
      c.send(fromTo(2, 5, false));
      c.send(F.buildBarrierRequest().setXid(70).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 70, 5000));
      HttpResponse<String> r = inst(5, two);
      assertEquals(200, r.statusCode(), r.body());
      JsonNode b = json(r);
      assertEquals(5, b.get("vport").asInt());
      assertEquals(2, b.get("instances").size());
      assertEquals("host", b.get("instances").get(1).get("switch").asText());
      assertEquals(1, b.get("rules").asInt(), "the in_port=2 rule now uses the group");
      assertTrue(b.get("ms").isNumber());
      OFPortStatus ps = (OFPortStatus) c.expect(OFType.PORT_STATUS, -1, 5000);
      assertEquals(OFPortReason.MODIFY, ps.getReason());
      int gid =
          os.core()
              .exec()
              .submit(() -> os.core().planner().scaleGroups().get(5))
              .get(5, TimeUnit.SECONDS);
      assertTrue(net.uno.oneswitch.translate.Translator.isScaleGroup(gid));
      // A controller cannot use the reserved group ids.
      c.send(
          F.buildGroupAdd()
              .setXid(71)
              .setGroup(OFGroup.of(gid))
              .setGroupType(org.projectfloodlight.openflow.protocol.OFGroupType.ALL)
              .setBuckets(List.of())
              .build());
      var err =
          (org.projectfloodlight.openflow.protocol.OFErrorMsg) c.expect(OFType.ERROR, 71, 5000);
      assertNotNull(err);
      assertTrue(err.toString().contains("INVALID_GROUP"), err.toString());
      // A wildcard in_port rule that outputs to the scaled port is refused (not faithful).
      c.send(fromTo(0, 5, true));
      var bad =
          (org.projectfloodlight.openflow.protocol.OFErrorMsg) c.expect(OFType.ERROR, 60, 5000);
      assertNotNull(bad);
      assertTrue(bad.toString().contains("BAD_OUT_PORT"), bad.toString());
    }
    JsonNode ports = json(get("/v1/ports", true));
    JsonNode v5 = null;
    for (JsonNode p : ports) {
      assertTrue(p.get("instances").size() >= 1, "every mapping lists instances");
      if (p.get("vport").asInt() == 5) {
        v5 = p;
      }
    }
    assertNotNull(v5);
    assertEquals("snic0", v5.get("switch").asText(), "switch/port = the first instance");
    assertEquals(200, v5.get("port").asInt());
    assertEquals(2, v5.get("instances").size());
    // Restart: the instances come back from state.json.
    os.core().exec().submit(os.core().state()::saveNow).get(5, TimeUnit.SECONDS); // as on shutdown
    os.stop();
    start();
    HttpResponse<String> again = get("/v1/ports", true);
    assertTrue(again.body().contains("{\"switch\":\"host\",\"port\":101}"), again.body());
    // Back to one instance: a plain remap; the group id is freed.
    HttpResponse<String> one = inst(5, "[{\"switch\": \"host\", \"port\": 101}]");
    assertEquals(200, one.statusCode(), one.body());
    assertEquals(1, json(one).get("instances").size());
    assertTrue(
        os.core()
            .exec()
            .submit(() -> os.core().planner().scaleGroups().isEmpty())
            .get(5, TimeUnit.SECONDS));
    // A wildcard rule outputting to vport 5 exists now: growing again is refused with 409.
    try (OfClient c = client()) {
      c.send(fromTo(0, 5, true));
      c.send(F.buildBarrierRequest().setXid(72).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 72, 5000));
    }
    HttpResponse<String> refused = inst(5, two);
    assertEquals("409 instances", field(refused));
    assertTrue(json(refused).get("error").asText().contains("in_port"), refused.body());
    assertTrue(
        os.core()
            .exec()
            .submit(() -> os.core().planner().scaleGroups().isEmpty())
            .get(5, TimeUnit.SECONDS),
        "nothing changed");
  }
}
