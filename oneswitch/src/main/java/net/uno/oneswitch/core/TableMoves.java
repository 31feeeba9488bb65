package net.uno.oneswitch.core;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.Offload;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where each virtual table runs (README "Table offload"): the table list with what each could move
 * to, and a table's move, re-translated and applied make-before-break like a remap (make: the table
 * and the handoff dispatch on the new place; modify: the handoff rules that re-point the packets;
 * break: the old copies, after a fresh barrier round and {@code drain_ms}). A move that cannot be
 * carried exactly, or that would put more rules on a switch than its {@code max_rules}, is refused
 * with a {@link PortError} (field {@code location}) and changes nothing. The placement is saved in
 * {@code tables.json} beside the state file. Core thread only.
 */
public final class TableMoves {
  private static final Logger LOG = LoggerFactory.getLogger(TableMoves.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * How long the old copies stay after the re-pointing when a move does not say ({@code drain_ms}):
   * OVS answers a barrier before its datapath revalidated its cached megaflows, so for a moment a
   * switch may still forward by the old rules (hand a packet off to the old place, whose copies and
   * dispatch must still be there).
   */
  public static final long DEFAULT_DRAIN_MS = 1000;

  /** The REST name of the host switch's location. */
  public static final String HOST = "host";

  /** A move's result: the table, where it ran and runs, its virtual rules, time and phases. */
  public record TableMove(
      int table, String from, String to, int rules, double ms, ApplyTrace trace) {}

  /** One table as {@code GET /v1/tables} shows it. */
  public record TableInfo(
      int table,
      String location,
      Integer hostMinPriority,
      int rules,
      Map<String, Integer> physical,
      Map<String, String> offload) {}

  private final Topology topo;
  private final VirtualSwitch vs;
  private final Planner planner;
  private final PhysicalSync sync;
  private final PlanExecutor executor;
  private final ScheduledExecutorService exec;
  private final Path file;

  /** The offload verdicts of {@link #tables()}, kept up to date by the rules that change. */
  private final OffloadVerdicts verdicts;

  /** {@code file}: where the placement is saved (null: nowhere). */
  TableMoves(
      Topology topo,
      VirtualSwitch vs,
      Planner planner,
      PhysicalSync sync,
      PlanExecutor executor,
      ScheduledExecutorService exec,
      Path file) {
    this.topo = topo;
    this.vs = vs;
    this.planner = planner;
    this.sync = sync;
    this.executor = executor;
    this.exec = exec;
    this.file = file;
    this.verdicts = new OffloadVerdicts(vs, planner, new VerdictTrials());
  }

  /** The trials of {@link OffloadVerdicts}: those of a move (whole, unsplit). */
  private final class VerdictTrials implements OffloadVerdicts.Trials {
    @Override
    public Map<String, Integer> whole(int t, String sw) throws PortError {
      Planner.MapTranslation m = translated(t, sw, null);
      planner.giveBack(m);
      return counts(m);
    }

    @Override
    public Map<String, Integer> rule(int t, String sw, VirtualRule r) throws PortError {
      Translations.Translated tr;
      try {
        tr = planner.trialRule(r, planner.offload().with(t, sw));
      } catch (OfError e) {
        throw refused(t, sw, e.getMessage());
      }
      planner.giveBack(List.of(tr));
      Map<String, Integer> out = new HashMap<>();
      tr.phys().forEach(p -> out.merge(p.sw(), 1, Integer::sum));
      return out;
    }

    @Override
    public String overLimit(int t, String sw, Map<String, Integer> counts) {
      String full = TableMoves.this.overLimit(counts);
      return full == null ? null : refused(t, sw, full).getMessage();
    }
  }

  /** How many whole trials and single rules {@code GET /v1/tables} translated so far. */
  long[] verdictTrials() {
    return verdicts.trials();
  }

  /** The location of table {@code t} as the REST API names it. */
  public String location(int t) {
    return name(planner.offload().location(t));
  }

  private String name(String loc) {
    return loc.equals(topo.host()) ? HOST : loc;
  }

  /** A REST location to a switch id or {@link Offload#EVERYWHERE}; 400 {@code location}. */
  private String resolve(String loc) throws PortError {
    if (loc.equals(Offload.EVERYWHERE)) {
      return loc;
    }
    if (loc.equals(HOST)) {
      return topo.host();
    }
    if (!topo.switches().contains(loc)) {
      throw PortError.invalid(
          "location",
          "unknown switch " + loc + " (everywhere, host or one of " + topo.switches() + ")");
    }
    return loc;
  }

  /** PUT /v1/tables/{t}: moves table {@code t} to {@code loc}, make-before-break. */
  public CompletableFuture<TableMove> move(int t, String loc, long drainMs) throws PortError {
    return move(t, loc, null, drainMs);
  }

  /**
   * PUT /v1/tables/{t}: moves table {@code t} to {@code loc}, split with {@code hostMin} (null:
   * whole; else the host keeps its rules of priority at least that, {@code loc} an sNIC).
   */
  public CompletableFuture<TableMove> move(int t, String loc, Integer hostMin, long drainMs)
      throws PortError {
    if (t < 0 || t >= vs.tables()) {
      throw PortError.invalid("table", "table must be 0.." + (vs.tables() - 1) + ", got " + t);
    }
    PortRequests.checkDrainMs(drainMs);
    String to = resolve(loc);
    if (hostMin != null) {
      if (hostMin < 1 || hostMin > 65535) {
        throw PortError.invalid(
            "host_min_priority", "host_min_priority must be 1..65535, got " + hostMin);
      }
      if (to.equals(Offload.EVERYWHERE) || to.equals(topo.host())) {
        throw PortError.invalid(
            "host_min_priority", "a table is split between the host and an sNIC: location " + loc);
      }
    }
    Offload cur = planner.offload();
    String from = cur.location(t);
    int rules = rulesOf(t);
    Integer fromMin = cur.hostMin(t).orElse(null);
    if (from.equals(to) && Objects.equals(fromMin, hostMin)) {
      return CompletableFuture.completedFuture(
          new TableMove(t, name(from), name(to), rules, 0, null));
    }
    if (!to.equals(Offload.EVERYWHERE)) {
      checkConnected(to);
    }
    long t0 = System.nanoTime();
    ApplyTrace trace = new ApplyTrace();
    // A split's host hands its own packets off below the high part it keeps, so the host's other
    // rules of that table must never come or go beside it (a half installed table): a move into or
    // out of a split goes through the table whole on its sNIC (its handoffs above everything).
    List<Object[]> hops = new ArrayList<>(); // {location, host_min_priority or null}
    if (fromMin != null) {
      hops.add(new Object[] {from, null});
    }
    if (hostMin != null) {
      hops.add(new Object[] {to, null});
    }
    hops.add(new Object[] {to, hostMin});
    List<Object[]> path = new ArrayList<>();
    Object[] at = {from, fromMin};
    for (Object[] h : hops) {
      if (!Arrays.equals(h, at)) {
        path.add(h);
        at = h;
      }
    }
    for (Object[] h : path) { // refused before anything changes
      planner.giveBack(trial(t, (String) h[0], (Integer) h[1]));
    }
    CompletableFuture<TableMove> f = CompletableFuture.completedFuture(null);
    for (Object[] h : path) {
      f =
          f.thenComposeAsync(
              x -> {
                try {
                  return once(t, (String) h[0], (Integer) h[1], drainMs, trace);
                } catch (PortError e) {
                  return CompletableFuture.failedFuture(e);
                }
              },
              exec);
    }
    return f.thenApply(
        x -> {
          double ms = (System.nanoTime() - t0) / 1e6;
          return new TableMove(t, name(from), name(to), rules, ms, trace);
        });
  }

  /** One make-before-break move of table {@code t} to {@code to} (split {@code hostMin}). */
  private CompletableFuture<TableMove> once(
      int t, String to, Integer hostMin, long drainMs, ApplyTrace trace) throws PortError {
    String from = planner.offload().location(t);
    int rules = rulesOf(t);
    long t0 = System.nanoTime();
    Planner.MapTranslation m = trial(t, to, hostMin);
    List<Long> held = planner.holdTags();
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    planner.installAll(m, dirty);
    List<Long> linger = planner.keepOrLinger(held);
    planner.refreshDispatch(dirty);
    planner.addInstalled(executor.liveSwitches(), dirty);
    save();
    Set<String> takeOver = to.equals(Offload.EVERYWHERE) ? null : Set.of(to);
    return sync.apply(dirty, Set.of(), true, trace, drainMs, repointFirst(to), takeOver, t + 1)
        .thenApplyAsync(
            x -> {
              if (!linger.isEmpty()) {
                exec.schedule(
                    () -> {
                      planner.releaseTags(linger);
                      sync.dispatchChanged();
                    },
                    PortChanges.LINGER_MS,
                    TimeUnit.MILLISECONDS);
              }
              double ms = (System.nanoTime() - t0) / 1e6;
              LOG.info("table {} moved {} -> {}: {} ms ({})", t, from, to, ms, trace);
              return new TableMove(t, name(from), name(to), rules, ms, trace);
            },
            exec);
  }

  /**
   * The switches re-pointed first when a table moves to {@code to}, in order: its new place, then
   * the host (which relays handoffs between sNICs); the other sNICs after them.
   */
  private List<String> repointFirst(String to) {
    if (to.equals(Offload.EVERYWHERE) || to.equals(topo.host())) {
      return List.of(topo.host());
    }
    return List.of(to, topo.host());
  }

  /**
   * The whole translation with table {@code t} on {@code to} (split with {@code hostMin}, null:
   * whole), not installed; refused (409 {@code location}, everything given back) where a rule
   * cannot be carried or a switch would hold more than its {@code max_rules}.
   */
  private Planner.MapTranslation trial(int t, String to, Integer hostMin) throws PortError {
    Planner.MapTranslation m = translated(t, to, hostMin);
    String full = overLimit(counts(m));
    if (full != null) {
      planner.giveBack(m);
      throw refused(t, to, full);
    }
    return m;
  }

  /** The whole translation with table {@code t} on {@code to}; refused where a rule cannot be. */
  private Planner.MapTranslation translated(int t, String to, Integer hostMin) throws PortError {
    try {
      return planner.translateFor(vs.ports(), List.of(), planner.offload().with(t, to, hostMin));
    } catch (OfError e) {
      throw refused(t, to, e.getMessage());
    }
  }

  private PortError refused(int t, String to, String why) {
    return PortError.conflict("location", "table " + t + " cannot run on " + name(to) + ": " + why);
  }

  /** The physical rules per switch of {@code m}'s rules and handoffs. */
  private static Map<String, Integer> counts(Planner.MapTranslation m) {
    Map<String, Integer> next = new TreeMap<>();
    for (Translations.Translated tr : m.rules().values()) {
      tr.phys().forEach(p -> next.merge(p.sw(), 1, Integer::sum));
    }
    m.handoffs().phys().forEach(p -> next.merge(p.sw(), 1, Integer::sum));
    return next;
  }

  /**
   * Why {@code next} (physical rules per switch of a translation) would put too many rules on a
   * switch with {@code max_rules}; null if none.
   */
  private String overLimit(Map<String, Integer> next) {
    // The dispatch rules stay about what they are (a tag or two more: counted with the current).
    Map<String, Integer> dispatch = planner.translations().dispatchCounts();
    for (String sw : topo.switches()) {
      Integer max = topo.maxRules(sw);
      if (max == null) {
        continue;
      }
      int n = next.getOrDefault(sw, 0) + dispatch.getOrDefault(sw, 0);
      if (n > max && n > planner.translations().count(sw)) {
        return "switch "
            + name(sw)
            + " would hold "
            + n
            + " physical rules, more than its max_rules "
            + max;
      }
    }
    return null;
  }

  private void checkConnected(String sw) throws PortError {
    Optional<SouthSwitch.Status> d = executor.down(sw);
    if (d.isPresent()) {
      throw PortError.conflict(
          "location",
          "switch "
              + name(sw)
              + " is disconnected ("
              + d.get().reason()
              + "): no table can move there");
    }
  }

  private int rulesOf(int t) {
    int n = 0;
    for (VirtualRule r : vs.rules().values()) {
      if (r.table() == t) {
        n++;
      }
    }
    return n;
  }

  /**
   * GET /v1/tables: every table that has rules or a location of its own, with its physical rules
   * per switch (replicas only) and, for each sNIC, null if it could move there now, else why not.
   */
  public List<TableInfo> tables() {
    Map<Integer, Integer> rules = new TreeMap<>();
    for (VirtualRule r : vs.rules().values()) {
      rules.merge(r.table(), 1, Integer::sum);
    }
    for (int t : planner.offload().locations().keySet()) {
      rules.putIfAbsent(t, 0);
    }
    Map<Integer, Map<String, Integer>> phys = new TreeMap<>();
    Translations tr = planner.translations();
    for (Map.Entry<PhysRule.Key, PhysRule> e : tr.desired().entrySet()) {
      if (tr.owners().get(e.getKey()) != null) {
        PhysRule p = e.getValue();
        phys.computeIfAbsent(p.table() - 1, k -> new TreeMap<>())
            .merge(name(p.sw()), 1, Integer::sum);
      }
    }
    List<TableInfo> out = new ArrayList<>();
    for (Map.Entry<Integer, Integer> e : rules.entrySet()) {
      int t = e.getKey();
      Map<String, String> can = new LinkedHashMap<>();
      for (String sw : topo.switches()) {
        if (!sw.equals(topo.host())) {
          can.put(sw, couldMove(t, sw));
        }
      }
      out.add(
          new TableInfo(
              t,
              location(t),
              planner.offload().hostMin(t).orElse(null),
              e.getValue(),
              phys.getOrDefault(t, Map.of()),
              can));
    }
    return out;
  }

  /** Null if table {@code t} could move to {@code sw} now, else why not (nothing changes). */
  private String couldMove(int t, String sw) {
    if (planner.offload().location(t).equals(sw)) {
      return null;
    }
    try {
      checkConnected(sw);
    } catch (PortError e) {
      return e.getMessage();
    }
    return verdicts.of(t, sw);
  }

  // ------------------------------------------------------------------ persistence

  private void save() {
    if (file == null) {
      return;
    }
    ObjectNode root = JSON.createObjectNode();
    ObjectNode locs = root.putObject("tables");
    planner.offload().locations().forEach((t, l) -> locs.put(Integer.toString(t), l));
    ObjectNode split = root.putObject("host_min_priority");
    planner.offload().hostMin().forEach((t, p) -> split.put(Integer.toString(t), p));
    try {
      Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
      Files.write(tmp, JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(root));
      Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      LOG.error("cannot save the table placement to {}: {}", file, e.toString());
    }
  }

  /**
   * Restores the saved placement (after the saved rules, before any switch connects): the whole
   * switch is translated with it. A placement the rules or switches no longer allow (an unknown
   * switch, a rule it cannot carry) is logged and left out: that table runs everywhere.
   */
  void restore() throws IOException {
    if (file == null || !Files.exists(file)) {
      return;
    }
    JsonNode root = JSON.readTree(file.toFile());
    JsonNode locs = root == null ? null : root.get("tables");
    if (locs == null || !locs.isObject()) {
      throw new IOException(file + ": \"tables\" must be an object");
    }
    JsonNode split = root.get("host_min_priority"); // absent in files of before the split
    if (split != null && !split.isObject()) {
      throw new IOException(file + ": \"host_min_priority\" must be an object");
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = locs.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      int t;
      try {
        t = Integer.parseInt(e.getKey());
      } catch (NumberFormatException x) {
        throw new IOException(file + ": table " + e.getKey() + " is not a number");
      }
      String loc = e.getValue().asText();
      JsonNode p = split == null ? null : split.get(e.getKey());
      Integer hostMin = p == null ? null : p.asInt();
      try {
        if (t < 0 || t >= vs.tables() || !topo.switches().contains(loc)) {
          throw PortError.invalid("location", "table " + t + " on " + loc + " is not valid here");
        }
        if (hostMin != null && (hostMin < 1 || hostMin > 65535 || loc.equals(topo.host()))) {
          throw PortError.invalid("host_min_priority", "split " + hostMin + " is not valid here");
        }
        Planner.MapTranslation m = trial(t, loc, hostMin);
        Set<PhysRule.Key> dirty = new LinkedHashSet<>();
        planner.installAll(m, dirty);
        planner.refreshDispatch(dirty);
        LOG.info("restored table {} on {} (host_min_priority {})", t, loc, hostMin);
      } catch (PortError x) {
        LOG.error(
            "saved table placement not restored, table {} runs everywhere: {}", t, x.getMessage());
      }
    }
  }
}
