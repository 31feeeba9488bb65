package net.uno.oneswitch.rest;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import net.uno.oneswitch.config.Endpoint;
import net.uno.oneswitch.core.GroupSpec;
import net.uno.oneswitch.core.OneSwitchCore;
import net.uno.oneswitch.core.PhysicalState;
import net.uno.oneswitch.core.PortChange;
import net.uno.oneswitch.core.PortChanges;
import net.uno.oneswitch.core.PortError;
import net.uno.oneswitch.core.TableMoves;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.north.NorthServer;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.Translator;
import org.projectfloodlight.openflow.protocol.OFPortDesc;
import org.projectfloodlight.openflow.protocol.OFPortState;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The small JSON REST API (docs/rest.md); status codes from {@link HttpStatus}. */
public final class RestServer {
  private static final Logger LOG = LoggerFactory.getLogger(RestServer.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private final OneSwitchCore core;
  private final NorthServer north;
  private final List<Endpoint> controllers;
  private final String token;
  private HttpServer http;

  public RestServer(
      OneSwitchCore core, NorthServer north, List<Endpoint> controllers, String token) {
    this.core = core;
    this.north = north;
    this.controllers = controllers;
    this.token = token;
  }

  /** Starts serving; returns the bound port. */
  public int start(Endpoint ep) throws IOException {
    // Keep-alive clients (the agent's OneSwitchClient) send the next request on the same
    // connection; the server writes headers and body in two writes, so with Nagle the body would
    // wait for the client's delayed ACK (up to 40 ms). Read once by the JDK server when its first
    // instance is made; HTTP/1.1 keep-alive itself is the JDK server's default (fixed-length
    // replies, idle connections kept 30 s).
    if (System.getProperty("sun.net.httpserver.nodelay") == null) {
      System.setProperty("sun.net.httpserver.nodelay", "true");
    }
    http = HttpServer.create(new InetSocketAddress(ep.host(), ep.port()), 64);
    http.createContext("/", this::handle);
    http.setExecutor(Executors.newFixedThreadPool(4));
    http.start();
    int port = http.getAddress().getPort();
    LOG.info("REST API on http://{}:{}", ep.host(), port);
    return port;
  }

  public void stop() {
    if (http != null) {
      http.stop(0);
    }
  }

  /** An HTTP error answer. */
  static final class HttpError extends Exception {
    private static final long serialVersionUID = 1L;
    final int status;
    final String field;

    HttpError(int status, String field, String msg) {
      super(msg);
      this.status = status;
      this.field = field;
    }
  }

  private record Reply(int status, Object body, String contentType) {}

  private void handle(HttpExchange ex) throws IOException {
    Reply r;
    try {
      if (token != null) {
        String auth = ex.getRequestHeaders().getFirst("Authorization");
        if (auth == null || !auth.equals("Bearer " + token)) {
          throw new HttpError(401, "Authorization", "missing or wrong bearer token");
        }
      }
      r = route(ex);
    } catch (HttpError e) {
      Map<String, Object> b = new LinkedHashMap<>();
      b.put("error", e.getMessage());
      if (e.field != null) {
        b.put("field", e.field);
      }
      r = new Reply(e.status, b, null);
    } catch (Exception e) {
      LOG.error("REST {} {}: {}", ex.getRequestMethod(), ex.getRequestURI(), e.toString(), e);
      r = new Reply(500, Map.of("error", "internal error: " + e), null);
    }
    byte[] body;
    String ct;
    if (r.contentType() != null) {
      body = ((String) r.body()).getBytes(StandardCharsets.UTF_8);
      ct = r.contentType();
    } else {
      body = JSON.writeValueAsBytes(r.body());
      ct = "application/json";
    }
    ex.getResponseHeaders().set("Content-Type", ct);
    ex.sendResponseHeaders(r.status(), body.length);
    try (OutputStream os = ex.getResponseBody()) {
      os.write(body);
    }
  }

  private Reply route(HttpExchange ex) throws Exception {
    String path = ex.getRequestURI().getPath();
    String m = ex.getRequestMethod();
    if (path.equals("/v1/health")) {
      only(m, "GET");
      return ok(onCore(this::health));
    }
    if (path.equals("/v1/switches")) {
      only(m, "GET");
      return ok(onCore(this::switches));
    }
    if (path.equals("/v1/ports")) {
      only(m, "GET");
      return ok(onCore(this::portList));
    }
    if (path.equals("/v1/rules")) {
      only(m, "GET");
      return ok(onCore(this::ruleList));
    }
    if (path.equals("/v1/physical")) {
      only(m, "GET");
      return ok(onCore(this::physical));
    }
    if (path.equals("/v1/tables")) {
      only(m, "GET");
      return ok(onCore(this::tableList));
    }
    if (path.startsWith("/v1/tables/") && path.split("/").length == 4) {
      only(m, "PUT");
      int t = table(path.split("/")[3]);
      JsonNode b = body(ex, Set.of("location", "drain_ms", "host_min_priority"));
      String loc = str(b, "location", true);
      long drain = msField(b, "drain_ms", 0, TableMoves.DEFAULT_DRAIN_MS);
      Integer hostMin = hostMinPriority(b);
      return tableMove(() -> core.tableMoves().move(t, loc, hostMin, drain));
    }
    if (path.equals("/metrics")) {
      only(m, "GET");
      String text =
          onCore(
              () ->
                  core.metrics()
                      .render(
                          core.vswitch().rules().size(), core.planner().physical().flowCount()));
      return new Reply(200, text, "text/plain; version=0.0.4");
    }
    String[] parts = path.split("/");
    if (parts.length >= 4 && parts[1].equals("v1") && parts[2].equals("ports")) {
      int vport = vport(parts[3]);
      if (parts.length == 4) {
        if (m.equals("PUT")) {
          JsonNode b = body(ex, Set.of("switch", "port", "name"));
          String sw = str(b, "switch", true);
          int port = portField(b);
          String name = str(b, "name", false);
          if (name != null && (name.isEmpty() || name.length() > 15)) {
            throw new HttpError(400, "name", "name must be 1-15 characters");
          }
          return change(() -> core.portChanges().mapPort(vport, sw, port, name));
        }
        if (m.equals("DELETE")) {
          return change(() -> core.portChanges().unmapPort(vport));
        }
        throw new HttpError(405, null, "method " + m + " not allowed");
      }
      if (parts.length == 5 && parts[4].equals("remap")) {
        Target t = target(ex, m, "drain_ms");
        long drain = drainMs(t.body());
        return change(() -> core.portChanges().remapPort(vport, t.sw(), t.port(), drain));
      }
      if (parts.length == 5 && parts[4].equals("prepare")) {
        Target t = target(ex, m, "ms");
        long ms = prepareMs(t.body());
        return prepared(
            vport,
            t.sw(),
            t.port(),
            () -> core.portChanges().preparePort(vport, t.sw(), t.port(), ms));
      }
      if (parts.length == 5 && parts[4].equals("instances")) {
        only(m, "PUT");
        JsonNode b = body(ex, Set.of("instances", "weights", "drain_ms"));
        List<VPort.Loc> inst = instances(b);
        List<Integer> weights = weights(b);
        long drain = drainMs(b);
        return scale(vport, () -> core.portChanges().setInstances(vport, inst, weights, drain));
      }
    }
    throw new HttpError(404, null, "no such path: " + path);
  }

  private static int table(String s) throws HttpError {
    try {
      int t = Integer.parseInt(s);
      if (t < 0 || t > 253) {
        throw new NumberFormatException();
      }
      return t;
    } catch (NumberFormatException e) {
      throw new HttpError(400, "table", "table must be an integer 0..253, got " + s);
    }
  }

  /** The optional {@code host_min_priority} of a table move: an integer 1..65535, or null. */
  private static Integer hostMinPriority(JsonNode b) throws HttpError {
    JsonNode n = b.get("host_min_priority");
    if (n == null || n.isNull()) {
      return null;
    }
    if (!n.isIntegralNumber() || n.asLong() < 1 || n.asLong() > 65535) {
      throw new HttpError(
          400, "host_min_priority", "host_min_priority must be an integer 1..65535");
    }
    return n.asInt();
  }

  private List<Map<String, Object>> tableList() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (TableMoves.TableInfo t : core.tableMoves().tables()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("table", t.table());
      m.put("location", t.location());
      m.put("host_min_priority", t.hostMinPriority());
      m.put("rules", t.rules());
      m.put("physical", t.physical());
      m.put("offload", t.offload());
      out.add(m);
    }
    return out;
  }

  interface TableOp {
    CompletableFuture<TableMoves.TableMove> run() throws PortError;
  }

  /** Runs a table move: {"table", "from", "to", "rules", "ms", "phases"}. */
  private Reply tableMove(TableOp op) throws Exception {
    CompletableFuture<CompletableFuture<TableMoves.TableMove>> f = new CompletableFuture<>();
    core.exec()
        .execute(
            () -> {
              try {
                f.complete(op.run());
              } catch (PortError | RuntimeException e) {
                f.completeExceptionally(e);
              }
            });
    TableMoves.TableMove mv;
    try {
      mv = f.get(120, TimeUnit.SECONDS).get(180, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof PortError p) {
        throw new HttpError(HttpStatus.of(p), p.field(), p.getMessage());
      }
      throw e;
    }
    Map<String, Object> b = new LinkedHashMap<>();
    b.put("table", mv.table());
    b.put("from", mv.from());
    b.put("to", mv.to());
    b.put("rules", mv.rules());
    b.put("ms", mv.ms());
    b.put("phases", mv.trace() == null ? List.of() : mv.trace().phaseMaps());
    return ok(b);
  }

  /** A POST body naming a physical port: {"switch", "port", extra?}. */
  private record Target(String sw, int port, JsonNode body) {}

  private static Target target(HttpExchange ex, String m, String extra)
      throws HttpError, IOException {
    only(m, "POST");
    JsonNode b = body(ex, Set.of("switch", "port", extra));
    String sw = str(b, "switch", true);
    return new Target(sw, portField(b), b);
  }

  private static Reply ok(Object body) {
    return new Reply(200, body, null);
  }

  private static void only(String m, String want) throws HttpError {
    if (!m.equals(want)) {
      throw new HttpError(405, null, "method " + m + " not allowed");
    }
  }

  private static int vport(String s) throws HttpError {
    try {
      long v = Long.parseLong(s);
      if (v < 1 || v > 0xffffff00L) {
        throw new NumberFormatException();
      }
      return (int) v;
    } catch (NumberFormatException e) {
      throw new HttpError(400, "vport", "vport must be an integer 1..4294967040, got " + s);
    }
  }

  private static JsonNode body(HttpExchange ex, Set<String> keys) throws HttpError, IOException {
    byte[] raw = ex.getRequestBody().readNBytes(65536);
    JsonNode n;
    try {
      n = JSON.readTree(raw);
    } catch (IOException e) {
      throw new HttpError(400, "body", "invalid JSON");
    }
    if (n == null || !n.isObject()) {
      throw new HttpError(400, "body", "must be a JSON object");
    }
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!keys.contains(k)) {
        throw new HttpError(400, k, "unknown field");
      }
    }
    return n;
  }

  private static String str(JsonNode b, String f, boolean required) throws HttpError {
    JsonNode v = b.get(f);
    if (v == null || v.isNull()) {
      if (required) {
        throw new HttpError(400, f, "is required");
      }
      return null;
    }
    if (!v.isTextual()) {
      throw new HttpError(400, f, "must be a string");
    }
    return v.asText();
  }

  /** How long a port leaving a vport stays an ingress-only (draining) port when not given. */
  static final long DEFAULT_DRAIN_MS = 2000;

  /** The optional {@code drain_ms} field: 0..60000, default {@link #DEFAULT_DRAIN_MS}. */
  private static long drainMs(JsonNode b) throws HttpError {
    return msField(b, "drain_ms", 0, DEFAULT_DRAIN_MS);
  }

  /** How long a prepared port waits for its remap when not given. */
  static final long DEFAULT_PREPARE_MS = 10_000;

  /** The optional {@code ms} field of a prepare: 1..60000, default {@link #DEFAULT_PREPARE_MS}. */
  private static long prepareMs(JsonNode b) throws HttpError {
    return msField(b, "ms", 1, DEFAULT_PREPARE_MS);
  }

  /** An optional duration field {@code f}: an integer min..MAX_DRAIN_MS, {@code dflt} if absent. */
  private static long msField(JsonNode b, String f, long min, long dflt) throws HttpError {
    JsonNode v = b.get(f);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.isIntegralNumber() || v.asLong() < min || v.asLong() > PortChanges.MAX_DRAIN_MS) {
      throw new HttpError(
          400, f, "must be an integer " + min + ".." + PortChanges.MAX_DRAIN_MS + " (ms)");
    }
    return v.asLong();
  }

  private static int portField(JsonNode b) throws HttpError {
    return portField(b, "port", "port");
  }

  private static int portField(JsonNode b, String key, String field) throws HttpError {
    JsonNode v = b.get(key);
    if (v == null || v.isNull()) {
      throw new HttpError(400, field, "is required");
    }
    if (!v.isIntegralNumber() || v.asLong() < 1 || v.asLong() > 0xffffff00L) {
      throw new HttpError(400, field, "must be an integer 1..4294967040");
    }
    return (int) v.asLong();
  }

  /** The body of PUT /v1/ports/{vport}/instances: shape only (the core checks the ports). */
  private static List<VPort.Loc> instances(JsonNode b) throws HttpError {
    JsonNode a = b.get("instances");
    if (a == null || a.isNull()) {
      throw new HttpError(400, "instances", "is required");
    }
    if (!a.isArray() || a.size() < 1 || a.size() > Translator.MAX_INSTANCES) {
      throw new HttpError(
          400, "instances", "must be an array of 1.." + Translator.MAX_INSTANCES + " instances");
    }
    List<VPort.Loc> out = new ArrayList<>();
    for (int i = 0; i < a.size(); i++) {
      JsonNode n = a.get(i);
      String f = "instances[" + i + "]";
      if (!n.isObject()) {
        throw new HttpError(400, f, "must be an object {switch, port}");
      }
      for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
        String k = it.next();
        if (!k.equals("switch") && !k.equals("port")) {
          throw new HttpError(400, f + "." + k, "unknown field");
        }
      }
      JsonNode sw = n.get("switch");
      if (sw == null || sw.isNull()) {
        throw new HttpError(400, f + ".switch", "is required");
      }
      if (!sw.isTextual()) {
        throw new HttpError(400, f + ".switch", "must be a string");
      }
      out.add(new VPort.Loc(sw.asText(), portField(n, "port", f + ".port")));
    }
    return out;
  }

  /**
   * The optional {@code weights} of PUT /v1/ports/{vport}/instances as integers; null when absent
   * (all equal). Their count and range are the core's to check ({@code PortRequests.checkWeights}).
   */
  static List<Integer> weights(JsonNode b) throws HttpError {
    JsonNode a = b.get("weights");
    if (a == null || a.isNull()) {
      return null;
    }
    if (!a.isArray()) {
      throw new HttpError(400, "weights", "must be an array of one weight per instance");
    }
    List<Integer> out = new ArrayList<>();
    for (JsonNode w : a) {
      if (!w.isIntegralNumber() || !w.canConvertToInt()) {
        throw new HttpError(
            400, "weights", "each weight must be an integer 1.." + VPort.MAX_WEIGHT);
      }
      out.add(w.asInt());
    }
    return out;
  }

  private static List<Map<String, Object>> locs(VPort v) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (VPort.Loc l : v.instances()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("switch", l.sw());
      m.put("port", Integer.toUnsignedLong(l.port()));
      out.add(m);
    }
    return out;
  }

  /** Runs a set-instances change: {"vport", "instances", "rules", "ms"}. */
  private Reply scale(int vport, PortOp op) throws Exception {
    PortChange pc = await(op);
    Map<String, Object> b = new LinkedHashMap<>();
    b.put("vport", Integer.toUnsignedLong(vport));
    b.put("instances", locs(pc.to()));
    b.put("weights", pc.to().weights());
    b.put("rules", pc.rules());
    b.put("ms", pc.durationMs());
    timing(b, pc);
    return new Reply(HttpStatus.of(pc), b, null);
  }

  /** Where the change's time went ({@link PortChange#trace}): plan_ms and phases. */
  private static void timing(Map<String, Object> b, PortChange pc) {
    if (pc.trace() != null) {
      b.put("plan_ms", pc.trace().planMs());
      b.put("phases", pc.trace().phaseMaps());
    }
  }

  private <T> T onCore(Supplier<T> s) throws Exception {
    try {
      return CompletableFuture.supplyAsync(s, core.exec()).get(30, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      throw (Exception) e.getCause();
    }
  }

  interface PortOp {
    CompletableFuture<PortChange> run() throws PortError;
  }

  private Reply change(PortOp op) throws Exception {
    PortChange pc = await(op);
    Map<String, Object> b = new LinkedHashMap<>();
    VPort v = pc.to() != null ? pc.to() : pc.from();
    b.put("vport", Integer.toUnsignedLong(v.vport()));
    b.put("from", pc.from() == null ? null : loc(pc.from()));
    b.put("to", pc.to() == null ? null : loc(pc.to()));
    b.put("rules", pc.rules());
    b.put("duration_ms", pc.durationMs());
    timing(b, pc);
    return new Reply(HttpStatus.of(pc), b, null);
  }

  /** Runs a prepare: {"vport", "switch", "port", "until_ms", "rules", "duration_ms"}. */
  private Reply prepared(int vport, String sw, int port, PortOp op) throws Exception {
    PortChange pc = await(op);
    Map<String, Object> b = new LinkedHashMap<>();
    b.put("vport", Integer.toUnsignedLong(vport));
    b.put("switch", sw);
    b.put("port", Integer.toUnsignedLong(port));
    Long until =
        onCore(
            () ->
                core.vswitch().ports().drainsOf(vport).stream()
                    .filter(d -> d.loc().sw().equals(sw) && d.loc().port() == port)
                    .map(Drain::untilMs)
                    .findFirst()
                    .orElse(null));
    b.put("until_ms", until);
    b.put("rules", pc.rules());
    b.put("duration_ms", pc.durationMs());
    timing(b, pc);
    return new Reply(HttpStatus.of(pc), b, null);
  }

  private PortChange await(PortOp op) throws Exception {
    CompletableFuture<CompletableFuture<PortChange>> f = new CompletableFuture<>();
    core.exec()
        .execute(
            () -> {
              try {
                // answered once the change is on disk too (it survives OneSwitch's death)
                f.complete(op.run().thenCompose(pc -> onCoreDurable().thenApply(x -> pc)));
              } catch (PortError e) {
                f.completeExceptionally(e);
              } catch (RuntimeException e) {
                f.completeExceptionally(e);
              }
            });
    PortChange pc;
    try {
      pc = f.get(30, TimeUnit.SECONDS).get(60, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof PortError p) {
        throw new HttpError(HttpStatus.of(p), p.field(), p.getMessage());
      }
      throw e;
    }
    return pc;
  }

  /** {@link OneSwitchCore#durable}, taken on the core thread wherever this is called. */
  private CompletableFuture<Void> onCoreDurable() {
    return CompletableFuture.supplyAsync(core::durable, core.exec()).thenCompose(f -> f);
  }

  private static Map<String, Object> loc(VPort v) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("switch", v.sw());
    m.put("port", Integer.toUnsignedLong(v.port()));
    m.put("name", v.name());
    return m;
  }

  private Map<String, Object> health() {
    Map<String, Object> b = new LinkedHashMap<>();
    Map<String, String> sws = new LinkedHashMap<>();
    boolean all = true;
    for (SouthSwitch s : core.south().values()) {
      sws.put(s.id(), s.isReady() ? "connected" : "disconnected");
      all &= s.isReady();
    }
    b.put("ok", all);
    b.put("switches", sws);
    Map<String, Object> states = new LinkedHashMap<>();
    for (SouthSwitch s : core.south().values()) {
      SouthSwitch.Status st = s.status();
      Map<String, Object> e = new LinkedHashMap<>();
      e.put("state", st.connected() ? "connected" : "disconnected");
      e.put("since_ms", st.sinceMs());
      e.put("reason", st.reason());
      e.put("downs", st.downs());
      states.put(s.id(), e);
    }
    b.put("switch_states", states);
    List<Map<String, Object>> cs = new ArrayList<>();
    Map<Endpoint, Boolean> st = north.controllerStates();
    for (Endpoint ep : controllers) {
      cs.add(Map.of("target", "tcp:" + ep, "connected", st.getOrDefault(ep, false)));
    }
    b.put("controllers", cs);
    b.put("sessions", core.controllers().sessions().size());
    return b;
  }

  private List<Map<String, Object>> switches() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (SouthSwitch s : core.south().values()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("id", s.id());
      m.put("connected", s.isReady());
      m.put("dpid", s.isReady() ? String.format("%016x", s.dpid()) : null);
      List<Map<String, Object>> ps = new ArrayList<>();
      for (OFPortDesc d : s.ports().values()) {
        Map<String, Object> p = new LinkedHashMap<>();
        int no = d.getPortNo().getPortNumber();
        boolean standard =
            Integer.compareUnsigned(
                    no, org.projectfloodlight.openflow.types.OFPort.MAX.getPortNumber())
                <= 0;
        p.put("port", standard ? (Object) Integer.toUnsignedLong(no) : d.getPortNo().toString());
        p.put("name", d.getName());
        p.put("state", d.getState().contains(OFPortState.LINK_DOWN) ? "down" : "up");
        ps.add(p);
      }
      m.put("ports", ps);
      out.add(m);
    }
    return out;
  }

  private List<Map<String, Object>> portList() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (VPort v : core.vswitch().ports().all()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("vport", Integer.toUnsignedLong(v.vport()));
      m.put("switch", v.sw());
      m.put("port", Integer.toUnsignedLong(v.port()));
      m.put("name", v.name());
      m.put("instances", locs(v));
      m.put("weights", v.weights());
      List<Map<String, Object>> dr = new ArrayList<>();
      List<Map<String, Object>> prep = new ArrayList<>();
      for (Drain d : core.vswitch().ports().drainsOf(v.vport())) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("switch", d.loc().sw());
        e.put("port", Integer.toUnsignedLong(d.loc().port()));
        e.put("until_ms", d.untilMs());
        (d.prepared() ? prep : dr).add(e);
      }
      m.put("draining", dr);
      m.put("prepared", prep);
      out.add(m);
    }
    return out;
  }

  /**
   * Per physical switch: whether it is connected, every flow OneSwitch wants it to hold (dispatch
   * included) with the cookie it is installed under (null: not installed, e.g. while the switch is
   * down), and every group it wants there (installed as wanted or not).
   */
  private Map<String, Object> physical() {
    Map<String, Object> out = new LinkedHashMap<>();
    PhysicalState phys = core.planner().physical();
    Map<String, Map<Integer, GroupSpec>> groups = core.planner().desiredGroups();
    for (SouthSwitch s : core.south().values()) {
      String id = s.id();
      List<PhysRule> want = new ArrayList<>(core.planner().wanted(id));
      want.sort(
          java.util.Comparator.comparingInt(PhysRule::table)
              .thenComparing(PhysRule::priority, java.util.Comparator.reverseOrder())
              .thenComparing(r -> r.key().match()));
      Map<PhysRule.Key, PhysicalState.Installed> have = s.isReady() ? phys.flows(id) : Map.of();
      List<Map<String, Object>> flows = new ArrayList<>();
      for (PhysRule r : want) {
        Map<String, Object> f = new LinkedHashMap<>();
        f.put("table", r.table());
        f.put("priority", r.priority());
        f.put("match", OfText.match(r.match()));
        f.put("actions", OfText.instructions(r.instructions()));
        PhysicalState.Installed i = have.get(r.key());
        f.put("cookie", i != null && i.rule().equals(r) ? String.format("0x%x", i.cookie()) : null);
        flows.add(f);
      }
      Map<Integer, GroupSpec> haveGroups = s.isReady() ? phys.groups(id) : Map.of();
      List<Map<String, Object>> gs = new ArrayList<>();
      for (Map.Entry<Integer, GroupSpec> g : groups.getOrDefault(id, Map.of()).entrySet()) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("group_id", Integer.toUnsignedLong(g.getKey()));
        e.put("type", g.getValue().type().name().toLowerCase(java.util.Locale.ROOT));
        e.put("installed", g.getValue().equals(haveGroups.get(g.getKey())));
        gs.add(e);
      }
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("connected", s.isReady());
      m.put("flows", flows);
      m.put("groups", gs);
      out.put(id, m);
    }
    return out;
  }

  private List<Map<String, Object>> ruleList() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (VirtualRule r : core.vswitch().rules().values()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("table", r.table());
      m.put("priority", r.priority());
      m.put("cookie", String.format("0x%x", r.cookie()));
      m.put("match", OfText.match(r.match()));
      m.put("instructions", OfText.instructions(r.instructions()));
      boolean wild = net.uno.oneswitch.translate.MatchUtil.inPort(r.match()).isEmpty();
      List<PhysRule> ps = core.planner().translationOf(r.key());
      m.put(
          "expansion",
          wild
              ? "wildcard in_port: replicated on every switch with mapped ports (" + ps.size() + ")"
              : (ps.isEmpty()
                  ? "in_port not mapped: not installed"
                  : ps.size() > 1
                      ? "in_port served by " + ps.size() + " instances: one replica each"
                      : "ingress switch only"));
      List<Map<String, Object>> phys = new ArrayList<>();
      for (PhysRule p : ps) {
        Map<String, Object> pm = new LinkedHashMap<>();
        pm.put("switch", p.sw());
        pm.put("table", p.table());
        pm.put("priority", p.priority());
        pm.put("match", OfText.match(p.match()));
        pm.put("actions", OfText.instructions(p.instructions()));
        phys.add(pm);
      }
      m.put("physical", phys);
      out.add(m);
    }
    return out;
  }
}
