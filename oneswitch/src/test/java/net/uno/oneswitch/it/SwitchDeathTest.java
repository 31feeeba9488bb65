package net.uno.oneswitch.it;

import static net.uno.oneswitch.it.Wait.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.Main;
import net.uno.oneswitch.config.Config;
import net.uno.oneswitch.core.GroupSpec;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.oftable.FakeOfTable;
import net.uno.oneswitch.oftable.Frame;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.projectfloodlight.openflow.protocol.OFPortState;
import org.projectfloodlight.openflow.protocol.OFPortStatus;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;

/**
 * A physical switch that dies (an sNIC's DPU rebooting, or its link cut) under OneSwitch, against
 * three fake switches (host, snic0, snic1): its death is seen (connection closed at once, silence
 * by the echo timeout), the controllers see its vports go link down and come back, an NF vport on
 * it is remapped away (or its instances changed, or a vport unmapped) without waiting for it, a
 * port change toward it is refused, and when it returns it is reconciled to exactly what is wanted
 * then. After each step the frames through the live switches (what the fake switches really hold,
 * walked across the PCIe links with {@link FakeOfTable}) leave as from the virtual switch, minus
 * what would leave through the dead switch.
 *
 * <p>Vports: 1 = snic0:1 (a wire port), 9 = snic1:1 (a wire port), 100 = host:100 (VM 0), 101 =
 * host:101 (VM 1), 200 = snic0:200 (the NF). Spare ports: host:200, snic0:201, snic1:200.
 */
class SwitchDeathTest {
  private static final OFFactory F = FakeSwitch.F;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, List<Integer>> PORTS =
      Map.of(
          "host", List.of(1, 2, 100, 101, 200),
          "snic0", List.of(1, 100, 200, 201),
          "snic1", List.of(1, 100, 200));

  /** (switch, PCIe port) -> the other end. */
  private static final Map<VPort.Loc, VPort.Loc> PCIE =
      Map.of(
          new VPort.Loc("host", 1), new VPort.Loc("snic0", 100),
          new VPort.Loc("snic0", 100), new VPort.Loc("host", 1),
          new VPort.Loc("host", 2), new VPort.Loc("snic1", 100),
          new VPort.Loc("snic1", 100), new VPort.Loc("host", 2));

  private final Map<String, FakeSwitch> fakes = new LinkedHashMap<>();
  private final Set<String> dead = new HashSet<>();
  private final HttpClient http = HttpClient.newHttpClient();
  private Main.Running os;
  private Path dir;
  private OfClient ctl;

  /** The controller's accepted flow-mods and group-mods, replayed onto the virtual switch. */
  private final List<OFFlowMod> rules = new ArrayList<>();

  private final List<OFGroupMod> groupMods = new ArrayList<>();

  /** PORT_STATUS messages the controller got, in order. */
  private final List<OFPortStatus> portStatus = new ArrayList<>();

  private long xid = 100;

  private void start(String keepalive) throws Exception {
    fakes.put("host", new FakeSwitch(0xa, PORTS.get("host")));
    fakes.put("snic0", new FakeSwitch(0xb, PORTS.get("snic0")));
    fakes.put("snic1", new FakeSwitch(0xc, PORTS.get("snic1")));
    dir = Files.createTempDirectory("oneswitch-death");
    String cfg =
            """
        {"dpid": "00000000000000ee", "listen": "ptcp:0:127.0.0.1", "rest": "127.0.0.1:0",
         "state_dir": "%s", %s
         "switches": [{"id": "host", "openflow": "tcp:127.0.0.1:%d"},
                      {"id": "snic0", "openflow": "tcp:127.0.0.1:%d"},
                      {"id": "snic1", "openflow": "tcp:127.0.0.1:%d"}],
         "pcie": [{"snic": "snic0", "host_port": 1, "snic_port": 100},
                  {"snic": "snic1", "host_port": 2, "snic_port": 100}],
         "ports": [{"vport": 1, "switch": "snic0", "port": 1, "name": "eth0"},
                   {"vport": 9, "switch": "snic1", "port": 1, "name": "eth1"},
                   {"vport": 100, "switch": "host", "port": 100, "name": "vm0"},
                   {"vport": 101, "switch": "host", "port": 101, "name": "vm1"},
                   {"vport": 200, "switch": "snic0", "port": 200, "name": "nf"}]}
        """
            .formatted(
                dir,
                keepalive,
                fakes.get("host").port(),
                fakes.get("snic0").port(),
                fakes.get("snic1").port());
    os = Main.run(Config.parse(cfg));
    waitFor(() -> health().get("ok").asBoolean());
    ctl = new OfClient(os.ofPort());
    ctl.send(F.buildHello().setXid(1).build());
    assertNotNull(ctl.expect(OFType.HELLO, -1, 5000));
    barrier();
    for (String sw : fakes.keySet()) {
      String s = sw;
      waitFor(() -> holdsWanted(s)); // reconciled
    }
  }

  @AfterEach
  void down() throws Exception {
    if (ctl != null) {
      ctl.close();
    }
    if (os != null) {
      os.stop();
    }
    for (FakeSwitch f : fakes.values()) {
      f.close();
    }
    if (dir != null) {
      try (var s = Files.walk(dir)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  // ------------------------------------------------------------------ the controller's rules

  private static Match in(int port, Integer ethType) {
    var m = F.buildMatch();
    if (port != 0) {
      m.setExact(MatchField.IN_PORT, OFPort.of(port));
    }
    if (ethType != null) {
      m.setExact(MatchField.ETH_TYPE, EthType.of(ethType));
    }
    return m.build();
  }

  private static OFAction out(int p) {
    return F.actions().output(OFPort.of(p), 0xffff);
  }

  private void flow(int prio, Match m, List<OFInstruction> ins) throws Exception {
    OFFlowMod fm =
        F.buildFlowAdd()
            .setXid(xid++)
            .setTableId(TableId.of(0))
            .setPriority(prio)
            .setMatch(m)
            .setInstructions(ins)
            .build();
    ctl.send(fm);
    rules.add(fm);
  }

  private static List<OFInstruction> apply(OFAction... a) {
    return List.of(F.instructions().applyActions(List.of(a)));
  }

  /**
   * VM 0 -> NF -> snic1's wire, and back; snic0's wire -> VM 0 (stays on snic0); a wildcard rule
   * (replicated on every switch); an action-set output to the NF (its carrier group); an ALL group
   * to the NF and snic1's wire.
   */
  private void installRules() throws Exception {
    OFGroupMod g =
        F.buildGroupAdd()
            .setXid(xid++)
            .setGroup(OFGroup.of(1))
            .setGroupType(OFGroupType.ALL)
            .setBuckets(
                List.of(
                    F.buildBucket()
                        .setActions(List.of(out(200)))
                        .setWatchGroup(OFGroup.ANY)
                        .setWatchPort(OFPort.ANY)
                        .build(),
                    F.buildBucket()
                        .setActions(List.of(out(9)))
                        .setWatchGroup(OFGroup.ANY)
                        .setWatchPort(OFPort.ANY)
                        .build()))
            .build();
    ctl.send(g);
    groupMods.add(g);
    flow(10, in(100, 0x0800), apply(out(200)));
    flow(10, in(200, 0x0800), apply(out(9)));
    flow(10, in(9, 0x0800), apply(out(200)));
    flow(10, in(1, 0x0800), apply(out(100)));
    flow(5, in(0, 0x88b5), apply(out(101)));
    flow(20, in(101, 0x0800), List.of(F.instructions().writeActions(List.of(out(200)))));
    flow(30, in(100, 0x0806), apply(F.actions().group(OFGroup.of(1))));
    barrier();
  }

  private void barrier() throws Exception {
    long x = xid++;
    ctl.send(F.buildBarrierRequest().setXid(x).build());
    assertNotNull(expect(OFType.BARRIER_REPLY, x), "barrier reply");
  }

  /**
   * Reads the controller connection until a message of {@code type} (xid {@code x}, any if < 0),
   * answering echoes and keeping the PORT_STATUS messages; null after 10 s.
   */
  private OFMessage expect(OFType type, long x) throws IOException {
    long end = System.currentTimeMillis() + 10_000;
    while (System.currentTimeMillis() < end) {
      OFMessage m = ctl.read((int) Math.max(1, end - System.currentTimeMillis()));
      if (m == null) {
        continue;
      }
      if (m.getType() == OFType.ECHO_REQUEST) {
        ctl.send(F.buildEchoReply().setXid(m.getXid()).build());
      }
      if (m instanceof OFPortStatus ps) {
        portStatus.add(ps);
      }
      if (m.getType() == type && (x < 0 || m.getXid() == x)) {
        return m;
      }
    }
    return null;
  }

  /** Reads the controller connection for {@code ms} (answering echoes, keeping PORT_STATUS). */
  private void readFor(int ms) throws IOException {
    long end = System.currentTimeMillis() + ms;
    while (System.currentTimeMillis() < end) {
      OFMessage m = ctl.read((int) Math.max(1, end - System.currentTimeMillis()));
      if (m instanceof OFPortStatus ps) {
        portStatus.add(ps);
      } else if (m != null && m.getType() == OFType.ECHO_REQUEST) {
        ctl.send(F.buildEchoReply().setXid(m.getXid()).build());
      }
    }
  }

  /** The next PORT_STATUS the controller gets for {@code vport} (waits up to 10 s). */
  private OFPortStatus portStatusOf(int vport) throws IOException {
    long end = System.currentTimeMillis() + 10_000;
    while (System.currentTimeMillis() < end) {
      for (int i = 0; i < portStatus.size(); i++) {
        if (portStatus.get(i).getDesc().getPortNo().getPortNumber() == vport) {
          return portStatus.remove(i);
        }
      }
      expect(OFType.PORT_STATUS, -1);
    }
    throw new AssertionError("no PORT_STATUS for vport " + vport);
  }

  private static boolean linkDown(OFPortStatus ps) {
    return ps.getDesc().getState().contains(OFPortState.LINK_DOWN);
  }

  // ------------------------------------------------------------------ REST

  private HttpResponse<String> call(String method, String path, String body) throws Exception {
    return http.send(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + os.restPort() + path))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private JsonNode json(String method, String path, String body, int status) throws Exception {
    HttpResponse<String> r = call(method, path, body);
    assertEquals(status, r.statusCode(), method + " " + path + ": " + r.body());
    return JSON.readTree(r.body());
  }

  private JsonNode health() {
    try {
      return JSON.readTree(call("GET", "/v1/health", null).body());
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private <T> T onCore(Callable<T> c) throws Exception {
    return os.core().exec().submit(c).get(10, TimeUnit.SECONDS);
  }

  // ------------------------------------------------------------------ the switches' state

  /** A flow as a switch holds it, cookie left out. */
  private record Entry(int table, int priority, Match match, List<OFInstruction> ins) {}

  private static Set<Entry> entries(List<PhysRule> rs) {
    Set<Entry> out = new HashSet<>();
    rs.forEach(r -> out.add(new Entry(r.table(), r.priority(), r.match(), r.instructions())));
    return out;
  }

  private Set<Entry> heldBy(String sw) {
    Set<Entry> out = new HashSet<>();
    for (OFFlowMod fm : fakes.get(sw).flows.values()) {
      out.add(
          new Entry(
              fm.getTableId().getValue(), fm.getPriority(), fm.getMatch(), fm.getInstructions()));
    }
    return out;
  }

  private Map<Integer, GroupSpec> groupsHeldBy(String sw) {
    Map<Integer, GroupSpec> out = new HashMap<>();
    for (OFGroupMod g : fakes.get(sw).groups.values()) {
      out.put(g.getGroup().getGroupNumber(), new GroupSpec(g.getGroupType(), g.getBuckets()));
    }
    return out;
  }

  /**
   * Switch {@code sw} holds exactly what OneSwitch wants there now: its flows (one each, under the
   * cookies OneSwitch installed them with) and its groups.
   */
  private boolean holdsWanted(String sw) {
    try {
      List<PhysRule> want = onCore(() -> os.core().planner().wanted(sw));
      Set<Long> cookies =
          onCore(
              () -> {
                Set<Long> c = new HashSet<>();
                os.core().planner().physical().flows(sw).values().forEach(i -> c.add(i.cookie()));
                return c;
              });
      Map<Integer, GroupSpec> groups =
          onCore(() -> os.core().planner().desiredGroups().getOrDefault(sw, Map.of()));
      FakeSwitch f = fakes.get(sw);
      return f.flows.size() == want.size()
          && heldBy(sw).equals(entries(want))
          && f.flows.keySet().equals(cookies)
          && groupsHeldBy(sw).equals(groups);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private void assertHoldsWanted(String sw) throws Exception {
    waitFor(() -> holdsWanted(sw));
    Set<Entry> want = entries(onCore(() -> os.core().planner().wanted(sw)));
    assertEquals(want, heldBy(sw), sw + " holds what is wanted");
  }

  // ------------------------------------------------------------------ packets

  private static final List<Frame> FRAMES =
      List.of(
          Frame.l4(0x020000000001L, 0x020000000002L, 0x0a000001, 0x0a000002, 17, 1000, 53)
              .payload("udp"),
          Frame.l4(0x020000000002L, 0x020000000001L, 0x0a000002, 0x0a000001, 6, 2000, 80)
              .payload("tcp"),
          Frame.arp(0x020000000001L, 1, 0x0a000001, 0x0a000002),
          Frame.eth(0x020000000003L, 0x020000000001L, 0x88b5).payload("x"));

  /**
   * Sends every frame into every vport served by a live switch, on the virtual switch and through
   * the physical switches as the fakes hold them (a dead switch drops everything it gets), and
   * asserts the same outputs, except those to vports served only on a dead switch (lost with it).
   * Returns how many frames left by at least one vport.
   */
  private int sameThroughLiveSwitches() throws Exception {
    PortMap pm = onCore(() -> os.core().vswitch().ports());
    Set<Integer> vports = new TreeSet<>();
    Map<VPort.Loc, Integer> vportAt = new HashMap<>();
    Set<Integer> lost = new HashSet<>();
    for (VPort v : pm.all()) {
      vports.add(v.vport());
      v.instances().forEach(l -> vportAt.put(l, v.vport()));
      if (v.instances().stream().allMatch(l -> dead.contains(l.sw()))) {
        lost.add(v.vport());
      }
    }
    FakeOfTable virtual = new FakeOfTable("virtual", vports);
    for (OFGroupMod g : groupMods) {
      virtual.addGroup(g.getGroup().getGroupNumber(), g.getGroupType(), g.getBuckets());
    }
    for (OFFlowMod fm : rules) {
      virtual.addFlow(
          fm.getTableId().getValue(), fm.getPriority(), fm.getMatch(), fm.getInstructions(), fm);
    }
    Map<String, FakeOfTable> phys = new HashMap<>();
    for (String sw : fakes.keySet()) {
      FakeOfTable t = new FakeOfTable(sw, new HashSet<>(PORTS.get(sw)));
      if (!dead.contains(sw)) {
        for (OFGroupMod g : fakes.get(sw).groups.values()) {
          t.addGroup(g.getGroup().getGroupNumber(), g.getGroupType(), g.getBuckets());
        }
        for (OFFlowMod fm : fakes.get(sw).flows.values()) {
          t.addFlow(
              fm.getTableId().getValue(),
              fm.getPriority(),
              fm.getMatch(),
              fm.getInstructions(),
              fm.getCookie());
        }
      }
      phys.put(sw, t);
    }
    int delivered = 0;
    for (VPort v : pm.all()) {
      if (lost.contains(v.vport())) {
        continue;
      }
      for (VPort.Loc at : v.instances()) {
        if (dead.contains(at.sw())) {
          continue;
        }
        for (Frame fr : FRAMES) {
          List<FakeOfTable.Output> want = new ArrayList<>();
          for (FakeOfTable.Output o : virtual.process(fr, v.vport())) {
            if (!lost.contains(o.port())) {
              want.add(o);
            }
          }
          List<FakeOfTable.Output> got = new ArrayList<>();
          walk(phys, at, fr, vportAt, got, 0);
          assertEquals(
              FakeOfTable.canonical(want),
              FakeOfTable.canonical(got),
              "frame " + fr + " into vport " + v.vport() + " at " + at + " (dead: " + dead + ")");
          delivered += want.isEmpty() ? 0 : 1;
        }
      }
    }
    return delivered;
  }

  private void walk(
      Map<String, FakeOfTable> phys,
      VPort.Loc in,
      Frame fr,
      Map<VPort.Loc, Integer> vportAt,
      List<FakeOfTable.Output> out,
      int hops) {
    assertTrue(hops < 8, "a frame loops over PCIe: " + fr);
    if (dead.contains(in.sw())) {
      return; // a dead switch forwards nothing
    }
    for (FakeOfTable.Output o : phys.get(in.sw()).process(fr, in.port())) {
      VPort.Loc at = new VPort.Loc(in.sw(), o.port());
      if (o.port() == FakeOfTable.CONTROLLER) {
        out.add(o);
      } else if (PCIE.containsKey(at)) {
        walk(phys, PCIE.get(at), o.frame(), vportAt, out, hops + 1);
      } else if (vportAt.containsKey(at)) {
        out.add(new FakeOfTable.Output(vportAt.get(at), o.frame()));
      } else {
        out.add(new FakeOfTable.Output(-1000 - o.port(), o.frame())); // an unmapped port
      }
    }
  }

  // ------------------------------------------------------------------ dying and returning

  private void kill(String sw, boolean wipe) throws Exception {
    dead.add(sw);
    fakes.get(sw).die(wipe);
    waitFor(() -> !health().get("switch_states").get(sw).get("state").asText().equals("connected"));
  }

  private void revive(String sw) throws Exception {
    fakes.get(sw).revive();
    waitFor(() -> health().get("ok").asBoolean());
    dead.remove(sw);
  }

  private static String remapBody(String sw, int port) {
    return "{\"switch\": \"" + sw + "\", \"port\": " + port + "}";
  }

  @Test
  void anNfRemappedAwayFromADeadSnicCarriesTrafficAtOnceAndTheSnicIsReconciledWhenItReturns()
      throws Exception {
    start("");
    installRules();
    assertTrue(sameThroughLiveSwitches() > 0);
    long killedAt = System.currentTimeMillis();
    kill("snic0", false); // the switch keeps its tables: stale rules to delete when it returns
    JsonNode st = health().get("switch_states").get("snic0");
    assertEquals("disconnected", st.get("state").asText());
    assertEquals("connection closed by the switch", st.get("reason").asText());
    assertEquals(1, st.get("downs").asInt());
    assertTrue(st.get("since_ms").asLong() >= killedAt, st.toString());
    assertEquals("disconnected", health().get("switches").get("snic0").asText());
    assertFalse(health().get("ok").asBoolean());
    // The controller sees snic0's vports go link down (the wire port, and the NF still there).
    OFPortStatus wire = portStatusOf(1);
    assertEquals(OFPortReason.MODIFY, wire.getReason());
    assertTrue(linkDown(wire), wire.toString());
    assertEquals(
        org.projectfloodlight.openflow.types.MacAddress.of(0x020000000001L),
        wire.getDesc().getHwAddr(),
        "the port's address is kept while it is down");
    assertTrue(linkDown(portStatusOf(200)));
    // While down, OneSwitch shows snic0's wanted flows as not installed.
    JsonNode phys = json("GET", "/v1/physical", null, 200);
    assertFalse(phys.get("snic0").get("connected").asBoolean());
    assertTrue(phys.get("snic0").get("flows").size() > 0);
    phys.get("snic0").get("flows").forEach(f -> assertTrue(f.get("cookie").isNull(), f.toString()));
    phys.get("host").get("flows").forEach(f -> assertFalse(f.get("cookie").isNull()));

    Map<String, Integer> before = new HashMap<>();
    fakes.forEach((k, f) -> before.put(k, f.logSnapshot().size()));
    long t0 = System.nanoTime();
    JsonNode r = json("POST", "/v1/ports/200/remap", remapBody("host", 200), 200);
    double wallMs = (System.nanoTime() - t0) / 1e6;
    System.out.printf(
        "remap away from a dead snic0: %.1f ms (REST call), duration_ms %s, phases %s%n",
        wallMs, r.get("duration_ms"), r.get("phases"));
    assertEquals("host", r.get("to").get("switch").asText());
    assertEquals(before.get("snic0"), fakes.get("snic0").logSnapshot().size(), "sent nothing");
    for (JsonNode p : r.get("phases")) {
      assertFalse(p.get("messages").has("snic0"), p.toString());
      assertFalse(p.get("barrier_ms").has("snic0"), p.toString());
    }
    // No drain window on the dead switch: nothing can come from its port.
    JsonNode port = portEntry(200);
    assertEquals(0, port.get("draining").size(), port.toString());
    // The NF vport is up again, at its new place.
    OFPortStatus nf = portStatusOf(200);
    assertEquals(OFPortReason.MODIFY, nf.getReason());
    assertFalse(linkDown(nf), nf.toString());
    // Traffic through the live switches: as the virtual switch, at once.
    assertHoldsWanted("host");
    assertHoldsWanted("snic1");
    assertTrue(sameThroughLiveSwitches() > 0);

    // snic0 returns with its old tables: reconciled to exactly what is wanted now (the NF's old
    // rules gone, its wire port's rules kept), and its wire port is up again.
    revive("snic0");
    assertHoldsWanted("snic0");
    assertFalse(
        fakes.get("snic0").flows.values().stream()
            .anyMatch(fm -> OFPort.of(200).equals(fm.getMatch().get(MatchField.IN_PORT))),
        "the NF's old rules are gone from snic0");
    assertTrue(
        fakes.get("snic0").flows.values().stream()
            .anyMatch(fm -> OFPort.of(1).equals(fm.getMatch().get(MatchField.IN_PORT))),
        "the wire port's rules are on snic0");
    OFPortStatus back = portStatusOf(1);
    assertFalse(linkDown(back), back.toString());
    st = health().get("switch_states").get("snic0");
    assertEquals("connected", st.get("state").asText());
    assertTrue(st.get("reason").isNull());
    assertEquals(1, st.get("downs").asInt());
    json("GET", "/v1/physical", null, 200)
        .get("snic0")
        .get("flows")
        .forEach(f -> assertFalse(f.get("cookie").isNull(), f.toString()));
    assertHoldsWanted("host");
    assertHoldsWanted("snic1");
    assertTrue(sameThroughLiveSwitches() > 0);
    // The NF vport did not flap when snic0 came back.
    readFor(500);
    assertTrue(
        portStatus.stream().noneMatch(ps -> ps.getDesc().getPortNo().getPortNumber() == 200),
        portStatus.toString());
  }

  private JsonNode portEntry(int vport) throws Exception {
    for (JsonNode p : json("GET", "/v1/ports", null, 200)) {
      if (p.get("vport").asInt() == vport) {
        return p;
      }
    }
    throw new AssertionError("vport " + vport + " not mapped");
  }

  @Test
  void aSilentSwitchIsDeclaredDownByEchoAndARemapWaitingForItEnds() throws Exception {
    start("\"echo_interval_ms\": 200, \"echo_timeout_ms\": 1200,");
    installRules();
    dead.add("snic0");
    long t0 = System.nanoTime();
    fakes.get("snic0").goSilent(); // no FIN, no RST: a link cut
    // A remap started before OneSwitch noticed: its phases wait for snic0's barrier until the
    // echo timeout declares it down, then go on without it.
    CompletableFuture<HttpResponse<String>> remap =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return call("POST", "/v1/ports/200/remap", remapBody("host", 200));
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    waitFor(() -> health().get("switches").get("snic0").asText().equals("disconnected"));
    double detectMs = (System.nanoTime() - t0) / 1e6;
    HttpResponse<String> r = remap.get(20, TimeUnit.SECONDS);
    double remapMs = (System.nanoTime() - t0) / 1e6;
    System.out.printf(
        "silent snic0: declared down after %.0f ms (echo 200 ms, timeout 1200 ms); the remap"
            + " started then answered after %.0f ms: %s%n",
        detectMs, remapMs, r.body());
    assertEquals(200, r.statusCode(), r.body());
    JsonNode st = health().get("switch_states").get("snic0");
    assertTrue(st.get("reason").asText().startsWith("echo timeout"), st.toString());
    assertTrue(linkDown(portStatusOf(1)));
    assertHoldsWanted("host");
    assertHoldsWanted("snic1");
    assertTrue(sameThroughLiveSwitches() > 0);
    // It answers again: a new connection, reconciled (its stale NF rules deleted).
    revive("snic0");
    assertHoldsWanted("snic0");
    assertFalse(linkDown(portStatusOf(1)));
    assertTrue(sameThroughLiveSwitches() > 0);
  }

  @Test
  void aPortChangeTowardADeadSwitchIsRefusedAndChangesNothing() throws Exception {
    start("");
    installRules();
    kill("snic0", true);
    String ports = call("GET", "/v1/ports", null).body();
    Map<String, Set<Long>> cookies = new HashMap<>();
    for (String sw : List.of("host", "snic1")) {
      cookies.put(sw, new HashSet<>(fakes.get(sw).flows.keySet()));
    }
    JsonNode e = json("POST", "/v1/ports/100/remap", remapBody("snic0", 201), 409);
    assertEquals("switch", e.get("field").asText());
    assertTrue(e.get("error").asText().contains("snic0 is disconnected"), e.toString());
    e = json("POST", "/v1/ports/100/prepare", remapBody("snic0", 201), 409);
    assertEquals("switch", e.get("field").asText());
    e =
        json(
            "PUT",
            "/v1/ports/100/instances",
            "{\"instances\": [{\"switch\": \"host\", \"port\": 100},"
                + " {\"switch\": \"snic0\", \"port\": 201}]}",
            409);
    assertEquals("instances[1].switch", e.get("field").asText());
    // Still checked first: an unknown port or a PCIe port is a 400, a port of another vport 409.
    assertEquals(
        "port",
        json("POST", "/v1/ports/100/remap", remapBody("snic0", 100), 400).get("field").asText());
    // A remap to where the vport already is, on the dead switch: nothing to do.
    json("POST", "/v1/ports/1/remap", remapBody("snic0", 1), 200);
    assertEquals(ports, call("GET", "/v1/ports", null).body(), "the port map is unchanged");
    for (String sw : List.of("host", "snic1")) {
      assertEquals(cookies.get(sw), fakes.get(sw).flows.keySet(), sw + " unchanged");
    }
    assertTrue(sameThroughLiveSwitches() > 0);
    // Mapping a new vport there moves no traffic: accepted, installed when the switch returns.
    json("PUT", "/v1/ports/300", remapBody("snic0", 201), 201);
    revive("snic0");
    assertHoldsWanted("snic0");
    assertTrue(
        fakes.get("snic0").flows.values().stream()
            .anyMatch(fm -> OFPort.of(201).equals(fm.getMatch().get(MatchField.IN_PORT))),
        "the new vport's dispatch entry on snic0");
    // Now a remap toward snic0 goes through.
    json("DELETE", "/v1/ports/300", null, 200);
    json("POST", "/v1/ports/100/remap", remapBody("snic0", 201), 200);
    for (String sw : fakes.keySet()) {
      assertHoldsWanted(sw);
    }
    assertTrue(sameThroughLiveSwitches() > 0);
  }

  @Test
  void instancesAndUnmapAwayFromADeadSwitchThenItReturnsWithEmptyTables() throws Exception {
    start("");
    installRules();
    json(
        "PUT",
        "/v1/ports/200/instances",
        "{\"instances\": [{\"switch\": \"snic0\", \"port\": 200},"
            + " {\"switch\": \"snic1\", \"port\": 200}], \"drain_ms\": 0}",
        200);
    assertTrue(sameThroughLiveSwitches() > 0);
    portStatus.clear();
    kill("snic0", true); // a reboot: its tables are empty when it returns
    assertTrue(linkDown(portStatusOf(1)));
    // The scaled-out NF vport stays up: its other instance's switch is alive.
    OFPortStatus nf = portStatusOf(200);
    assertFalse(linkDown(nf), nf.toString());
    assertEquals(
        org.projectfloodlight.openflow.types.MacAddress.of(0x020000000000L + 200),
        nf.getDesc().getHwAddr());
    long t0 = System.nanoTime();
    JsonNode r =
        json(
            "PUT",
            "/v1/ports/200/instances",
            "{\"instances\": [{\"switch\": \"snic1\", \"port\": 200}]}",
            200);
    System.out.printf(
        "instances away from a dead snic0: %.1f ms (REST call): %s%n",
        (System.nanoTime() - t0) / 1e6, r);
    assertEquals(0, portEntry(200).get("draining").size());
    assertHoldsWanted("host");
    assertHoldsWanted("snic1");
    assertTrue(sameThroughLiveSwitches() > 0);
    // Unmapping snic0's wire port while snic0 is down: the live switches stop sending to it.
    json("DELETE", "/v1/ports/1", null, 200);
    OFPortStatus del = portStatusOf(1);
    assertEquals(OFPortReason.DELETE, del.getReason());
    assertHoldsWanted("host");
    assertHoldsWanted("snic1");
    assertTrue(sameThroughLiveSwitches() > 0);
    revive("snic0");
    assertHoldsWanted("snic0");
    assertTrue(
        fakes.get("snic0").flows.values().stream()
            .map(fm -> fm.getMatch().get(MatchField.IN_PORT))
            .noneMatch(p -> OFPort.of(1).equals(p) || OFPort.of(200).equals(p)),
        "neither the unmapped wire port nor the NF's old instance has a rule on snic0");
    assertTrue(sameThroughLiveSwitches() > 0);
  }
}
