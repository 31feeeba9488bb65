package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArraySet;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import net.uno.oneswitch.core.Translations.Translated;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.south.SouthListener;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.ActionSetOrder;
import net.uno.oneswitch.translate.Carrier;
import net.uno.oneswitch.translate.CarrierTags;
import net.uno.oneswitch.translate.GroupLabels;
import net.uno.oneswitch.translate.MatchUtil;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.Translator;
import net.uno.oneswitch.translate.VlanPushOrder;
import net.uno.oneswitch.translate.WriteActionSet;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFErrorMsg;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.OFFlowRemoved;
import org.projectfloodlight.openflow.protocol.OFFlowRemovedReason;
import org.projectfloodlight.openflow.protocol.OFFlowStatsReply;
import org.projectfloodlight.openflow.protocol.OFGroupAdd;
import org.projectfloodlight.openflow.protocol.OFGroupDescStatsReply;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupModFailedCode;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketOut;
import org.projectfloodlight.openflow.protocol.OFPortDesc;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.projectfloodlight.openflow.protocol.OFPortState;
import org.projectfloodlight.openflow.protocol.OFPortStatus;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one owner of the virtual switch state. Every method runs on the single core executor ({@link
 * #exec()}); callers on other threads post to it.
 */
public final class OneSwitchCore implements SouthListener {
  private static final Logger LOG = LoggerFactory.getLogger(OneSwitchCore.class);
  public static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private final Topology topo;
  private final int nVirt;
  private final ScheduledExecutorService exec;
  private final LongSupplier clock;
  private final Metrics metrics;
  private final Persistence persistence;
  private final Map<String, SouthSwitch> south = new LinkedHashMap<>();
  private final Set<Session> sessions = new CopyOnWriteArraySet<>();

  private final LinkedHashMap<VirtualRule.Key, VirtualRule> rules = new LinkedHashMap<>();
  private final TreeMap<Integer, VirtualGroup> groups = new TreeMap<>();
  private PortMap ports = PortMap.empty();
  private final CarrierTags tags = new CarrierTags();
  private final Carrier.Mode carrierMode;

  /** The ids of OneSwitch's SELECT groups of the scaled-out vports. */
  private final ScaleGroupIds scaleIds = new ScaleGroupIds();

  /** vport -> group id of OneSwitch's SELECT group, for every vport with several instances. */
  private final Map<Integer, Integer> scaleGroups = scaleIds.byVport();

  /** What the rules write into the action set, per table (WriteActionSet's order check). */
  private final ActionSetOrder setOrder = new ActionSetOrder();

  /** How many VLAN headers a frame may carry into each table (VlanPushOrder). */
  private final VlanPushOrder pushOrder;

  /** Each virtual rule's and group's physical form, and the dispatch rules of the live tags. */
  private final Translations trans = new Translations(tags);

  private final SavedForm saved = new SavedForm(F);
  private final PhysicalState phys = new PhysicalState();
  private final FlowRemovals removals;
  private final IdleTimeouts idle = new IdleTimeouts();
  private final Map<Integer, Long> groupCreated = new HashMap<>();
  private int missSendLen = 128;

  /** A scratch core (WarmUp): its port changes are not logged. */
  boolean quiet;

  private boolean saveScheduled;
  private boolean idlePollRunning;

  /** The controller message a physical message comes from: who to answer if a switch refuses. */
  public record Origin(Session session, long xid, byte[] head) {}

  /** Physical messages of controller messages, until barriered: rollback on a refusal. */
  private final Refusals refusals = new Refusals();

  /** Sends plans to the switches (make-before-break when barriered). */
  private final PlanExecutor executor;

  public OneSwitchCore(
      Topology topo,
      int physicalTables,
      ScheduledExecutorService exec,
      LongSupplier clock,
      Metrics metrics,
      Persistence persistence) {
    this(
        topo,
        physicalTables,
        exec,
        clock,
        metrics,
        persistence,
        Carrier.Mode.AUTO,
        VlanPushOrder.WIRE);
  }

  /**
   * {@code carrierMode}: the flow-id carrier (config {@code carrier}); {@code wireVlans}: the most
   * VLAN headers a frame may carry when it comes in from a port, 1 or 2 (config {@code wire_vlans},
   * {@link VlanPushOrder}).
   */
  public OneSwitchCore(
      Topology topo,
      int physicalTables,
      ScheduledExecutorService exec,
      LongSupplier clock,
      Metrics metrics,
      Persistence persistence,
      Carrier.Mode carrierMode,
      int wireVlans) {
    this.carrierMode = carrierMode;
    this.pushOrder = new VlanPushOrder(wireVlans);
    this.topo = topo;
    this.nVirt = physicalTables - 2;
    this.exec = exec;
    this.clock = clock;
    this.metrics = metrics;
    this.persistence = persistence;
    this.removals = new FlowRemovals(F, clock, fr -> broadcast(fr, true));
    this.executor = new PlanExecutor(south, refusals, metrics, exec);
  }

  public ScheduledExecutorService exec() {
    return exec;
  }

  public Metrics metrics() {
    return metrics;
  }

  public int virtualTables() {
    return nVirt;
  }

  public Topology topology() {
    return topo;
  }

  public void addSouth(SouthSwitch s) {
    south.put(s.id(), s);
  }

  public Map<String, SouthSwitch> south() {
    return south;
  }

  public void addSession(Session s) {
    sessions.add(s);
  }

  public void removeSession(Session s) {
    sessions.remove(s);
  }

  public Set<Session> sessions() {
    return sessions;
  }

  public int missSendLen() {
    return missSendLen;
  }

  public void setMissSendLen(int v) {
    missSendLen = v;
  }

  public PortMap ports() {
    return ports;
  }

  public Map<VirtualRule.Key, VirtualRule> rules() {
    return rules;
  }

  public Map<Integer, VirtualGroup> groups() {
    return groups;
  }

  public List<PhysRule> translationOf(VirtualRule.Key k) {
    return trans.of(k);
  }

  public PhysicalState physical() {
    return phys;
  }

  /** Live flow-id tags: tag key (Translator.tagKey: vport, instance slot) -> tag. */
  public Map<Long, Integer> liveTags() {
    return tags.live();
  }

  /** vport -> id of OneSwitch's SELECT group, for the vports with several instances. */
  public Map<Integer, Integer> scaleGroups() {
    return Map.copyOf(scaleGroups);
  }

  /** Starts the timeout timer. */
  public void start() {
    exec.scheduleWithFixedDelay(this::tick, 1, 1, TimeUnit.SECONDS);
    exec.execute(() -> WarmUp.run(topo, nVirt + 2, exec));
  }

  // ------------------------------------------------------------------ translation bookkeeping

  private Translator translator(PortMap pm, Set<Long> used) {
    return new Translator(
            topo,
            pm,
            nVirt,
            v -> {
              if (used.contains(v)) {
                return tags.tagOf(v).getAsInt();
              }
              int t = tags.acquire(v);
              used.add(v);
              return t;
            },
            groups::containsKey,
            scaleGroups,
            groups::get)
        .carrier(carrierMode)
        .depth(pushOrder::depth)
        .later(pushOrder::later)
        .groupLabels(trans.carriers()::variant);
  }

  /** A translator for lookups only (dispatch, packet-in, scale group buckets). */
  private Translator plainTranslator() {
    return new Translator(topo, ports, nVirt, v -> 0, g -> true, scaleGroups);
  }

  private Translated translate(VirtualRule r, PortMap pm) throws OfError {
    Set<Long> used = new HashSet<>();
    try {
      return new Translated(translator(pm, used).rule(r), used);
    } catch (OfError e) {
      used.forEach(tags::release);
      throw e;
    }
  }

  /**
   * Translations of {@code adds} (replacing {@code olds}) and of the rules whose frame depth
   * changes with them: when a VLAN push changes how many headers a frame may carry into a table
   * ({@link VlanPushOrder}), the relying rules of that table are re-translated, deeper or back.
   * Leaves the rules and pushOrder as they were; on a failure gives the tags back and throws: a
   * change that would make a relying rule deeper than it can be carried is refused, naming that
   * rule.
   */
  private Map<VirtualRule.Key, Translated> translateChange(
      List<VirtualRule> olds, List<VirtualRule> adds) throws OfError {
    VlanPushOrder.Depths before = pushOrder.depths();
    olds.forEach(pushOrder::remove);
    adds.forEach(pushOrder::add);
    Map<VirtualRule.Key, Translated> out = new LinkedHashMap<>();
    try {
      for (VirtualRule r : adds) {
        out.put(r.key(), translate(r, ports));
      }
      VlanPushOrder.Depths after = pushOrder.depths();
      for (VirtualRule r : relyingWhereChanged(before, after)) {
        if (out.containsKey(r.key())) {
          continue;
        }
        try {
          out.put(r.key(), translate(r, ports));
        } catch (OfError e) {
          int t = r.table();
          int next = Math.max(0, VlanPushOrder.setGoesOn(r));
          if (after.at(t) <= before.at(t) && after.after(next) <= before.after(next)) {
            continue; // shallower than it was: its deeper translation is still faithful
          }
          throw new OfError(
              e.code(),
              "a VLAN pushed here may reach table "
                  + t
                  + " with "
                  + Math.max(after.at(t), after.after(next))
                  + " headers, where rule priority="
                  + r.priority()
                  + " cannot then be carried: "
                  + e.getMessage());
        }
      }
      return out;
    } catch (OfError e) {
      out.values().forEach(t -> t.tagVports().forEach(tags::release));
      throw e;
    } finally {
      adds.forEach(pushOrder::remove);
      olds.forEach(pushOrder::add);
    }
  }

  /**
   * The rules relying on the frame depth in the tables whose depth differs between two snapshots.
   */
  private List<VirtualRule> relyingWhereChanged(VlanPushOrder.Depths a, VlanPushOrder.Depths b) {
    if (a.equals(b)) {
      return List.of();
    }
    List<VirtualRule> out = new ArrayList<>();
    for (VirtualRule r : rules.values()) {
      int t = r.table();
      int next = VlanPushOrder.setGoesOn(r);
      if ((a.at(t) != b.at(t) && VlanPushOrder.reliesOnDepth(r))
          || (next >= 0 && a.after(next) != b.after(next))) {
        out.add(r);
      }
    }
    return out;
  }

  /**
   * After rules were removed: re-translates the relying rules of tables whose depth dropped from
   * {@code before} (the VLAN carrier again where it fits). A rule that fails keeps its deeper
   * translation, which stays faithful.
   */
  private void retranslateShallower(VlanPushOrder.Depths before, Set<PhysRule.Key> dirty) {
    for (VirtualRule r : relyingWhereChanged(before, pushOrder.depths())) {
      try {
        trans.set(r.key(), translate(r, ports), dirty);
      } catch (OfError e) {
        LOG.debug("rule {} keeps its deeper translation: {}", r.key(), e.getMessage());
      }
    }
  }

  private Map<String, List<OFBucket>> translateGroup(VirtualGroup g, PortMap pm, Set<Long> used)
      throws OfError {
    Map<String, List<OFBucket>> out = new LinkedHashMap<>();
    try {
      Translator t = translator(pm, used);
      for (String sw : topo.switches()) {
        out.put(sw, t.buckets(g, sw));
      }
      return out;
    } catch (OfError e) {
      used.forEach(tags::release);
      used.clear();
      throw e;
    }
  }

  private void refreshDispatch(Set<PhysRule.Key> dirty) {
    trans.refreshDispatch(ports, this::plainTranslator, dirty);
  }

  /** The groups each switch should hold now (tests). */
  Map<String, Map<Integer, GroupSpec>> plannedGroups() {
    return desiredGroups();
  }

  private Map<String, Map<Integer, GroupSpec>> desiredGroups() {
    Map<String, Map<Integer, GroupSpec>> out = new HashMap<>();
    for (VirtualGroup g : groups.values()) {
      Map<String, List<OFBucket>> t = trans.groupBuckets(g.groupId());
      for (Map.Entry<String, List<OFBucket>> e : t.entrySet()) {
        out.computeIfAbsent(e.getKey(), k -> new TreeMap<>())
            .put(g.groupId(), new GroupSpec(g.type(), e.getValue()));
      }
    }
    trans.carriers().addGroups(topo, ports, scaleGroups, groups::get, tags::tagOf, out);
    // OneSwitch's SELECT group of each scaled-out vport, on every switch whose tags are live.
    Translator t = plainTranslator();
    for (Map.Entry<Integer, Integer> e : scaleGroups.entrySet()) {
      Optional<VPort> v = ports.get(e.getKey());
      if (v.isEmpty() || v.get().k() < 2) {
        continue;
      }
      for (String sw : topo.switches()) {
        t.scaleBuckets(v.get(), sw, tags::tagOf)
            .ifPresent(
                b ->
                    out.computeIfAbsent(sw, k -> new TreeMap<>())
                        .put(e.getValue(), new GroupSpec(OFGroupType.SELECT, b)));
      }
    }
    return out;
  }

  private CompletableFuture<Void> apply(
      Set<PhysRule.Key> dirty, Set<PhysRule.Key> readd, boolean barriers) {
    return apply(dirty, readd, barriers, null);
  }

  /** As {@link #apply(Set, Set, boolean)}; a barriered apply's time goes into {@code trace}. */
  private CompletableFuture<Void> apply(
      Set<PhysRule.Key> dirty, Set<PhysRule.Key> readd, boolean barriers, ApplyTrace trace) {
    PhysicalState.Plan p =
        phys.plan(
            trans.desired(),
            trans.owners(),
            dirty,
            readd,
            desiredGroups(),
            executor.liveSwitches());
    for (PhysicalState.Installed i : p.deleted) {
      if (i.owner() != null && rules.containsKey(i.owner())) {
        removals.retiring(i.cookie(), i.owner());
      }
    }
    if (trace != null) {
      trace.planned();
    }
    scheduleSave();
    return executor.execute(p, barriers, trace);
  }

  private CompletableFuture<Void> execute(PhysicalState.Plan p, boolean barriers) {
    return executor.execute(p, barriers, null);
  }

  /**
   * Completes when every connected physical switch answered a barrier (errors ignored), on the core
   * thread after the switch's earlier errors were handled: a refusal reaches the controller before
   * the BARRIER_REPLY that covers its message.
   */
  public CompletableFuture<Void> barrierAll() {
    return executor.barrierAll(false, null);
  }

  // ------------------------------------------------------------------ flow-mods

  /**
   * Applies a controller's FLOW_MOD: as {@link #flowMod(OFFlowMod)}, and if a physical switch later
   * refuses a part of it, {@code origin} gets an OFPT_ERROR and the change is rolled back.
   */
  public void flowMod(OFFlowMod fm, Origin origin) throws OfError {
    refusals.begin(origin);
    try {
      flowMod(fm);
    } finally {
      refusals.end();
    }
  }

  /** As {@link #groupMod(OFGroupMod)}, answering {@code origin} on a physical refusal. */
  public void groupMod(OFGroupMod gm, Origin origin) throws OfError {
    refusals.begin(origin);
    try {
      groupMod(gm);
    } finally {
      refusals.end();
    }
  }

  /** Puts {@code old} back in place of whatever rule holds its key; drops the key if it fails. */
  /**
   * Every change of {@code rules} goes through here and {@link #removeRule} (setOrder's counts).
   */
  private VirtualRule putRule(VirtualRule r) {
    VirtualRule old = rules.put(r.key(), r);
    setOrder.remove(old);
    setOrder.add(r);
    pushOrder.remove(old);
    pushOrder.add(r);
    return old;
  }

  private VirtualRule removeRule(VirtualRule.Key k) {
    VirtualRule old = rules.remove(k);
    setOrder.remove(old);
    pushOrder.remove(old);
    return old;
  }

  private void reinstall(VirtualRule old) {
    VirtualRule.Key key = old.key();
    try {
      setOrder.check(old); // a rule added since may conflict with the old one
      VirtualRule cur = rules.get(key);
      Map<VirtualRule.Key, Translated> ts =
          translateChange(cur == null ? List.of() : List.of(cur), List.of(old));
      putRule(old);
      Set<PhysRule.Key> dirty = new LinkedHashSet<>();
      ts.forEach((k, t) -> trans.set(k, t, dirty));
      refreshDispatch(dirty);
      apply(dirty, Set.of(), false);
    } catch (OfError e) {
      LOG.error("rollback: cannot restore rule {}: {}", key, e.getMessage());
      dropRule(key);
    }
  }

  /** Removes a virtual rule without FLOW_REMOVED (the controller was told its ADD failed). */
  private void dropRule(VirtualRule.Key key) {
    VlanPushOrder.Depths pushed = pushOrder.depths();
    if (removeRule(key) == null) {
      return;
    }
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    trans.set(key, null, dirty);
    removals.forget(key);
    idle.forget(key);
    retranslateShallower(pushed, dirty);
    refreshDispatch(dirty);
    apply(dirty, Set.of(), false);
  }

  /** Applies a virtual FLOW_MOD; throws the OpenFlow error to answer with (state unchanged). */
  public void flowMod(OFFlowMod fm) throws OfError {
    long t0 = System.nanoTime();
    metrics.flowMods.incrementAndGet();
    try {
      switch (fm.getCommand()) {
        case ADD -> add(fm);
        case MODIFY -> modify(fm, false);
        case MODIFY_STRICT -> modify(fm, true);
        case DELETE -> delete(fm, false);
        case DELETE_STRICT -> delete(fm, true);
        default -> throw new OfError(OFFlowModFailedCode.BAD_COMMAND, "" + fm.getCommand());
      }
    } catch (OfError e) {
      metrics.translationErrors.incrementAndGet();
      throw e;
    } finally {
      metrics.flowModLatency((System.nanoTime() - t0) / 1e9);
    }
  }

  private int table(OFFlowMod fm, boolean allOk) throws OfError {
    int t = fm.getTableId().getValue();
    if (allOk && fm.getTableId().equals(TableId.ALL)) {
      return -1;
    }
    if (t >= nVirt) {
      throw new OfError(OFFlowModFailedCode.BAD_TABLE_ID, "table " + t);
    }
    return t;
  }

  private void add(OFFlowMod fm) throws OfError {
    int table = table(fm, false);
    if (!fm.getBufferId().equals(OFBufferId.NO_BUFFER)) {
      throw new OfError(OFBadRequestCode.BUFFER_UNKNOWN, "OneSwitch buffers no packets");
    }
    VirtualRule r = VirtualRule.of(fm, table, clock.getAsLong());
    addRule(r, fm.getFlags().contains(OFFlowModFlags.CHECK_OVERLAP));
  }

  void addRule(VirtualRule r, boolean checkOverlap) throws OfError {
    VirtualRule.Key key = r.key();
    if (checkOverlap) {
      for (VirtualRule o : rules.values()) {
        if (o.table() == r.table()
            && o.priority() == r.priority()
            && !o.key().equals(key)
            && MatchUtil.overlaps(o.match(), r.match())) {
          throw new OfError(OFFlowModFailedCode.OVERLAP, "overlaps an existing entry");
        }
      }
    }
    setOrder.check(r);
    VirtualRule prev = rules.get(key);
    Map<VirtualRule.Key, Translated> ts =
        translateChange(prev == null ? List.of() : List.of(prev), List.of(r));
    Translated t = ts.get(key);
    VirtualRule old = removeRule(key);
    putRule(r);
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    ts.forEach((k, tr) -> trans.set(k, tr, dirty));
    removals.forget(key);
    idle.forget(key);
    Set<PhysRule.Key> readd = new HashSet<>();
    if (old != null) {
      t.phys().forEach(p -> readd.add(p.key())); // ADD over an identical entry clears counters
    }
    refreshDispatch(dirty);
    refusals.onUndo(
        () -> {
          if (rules.get(key) != r) {
            return; // a later message replaced it: that one stands
          }
          if (old == null) {
            dropRule(key);
          } else {
            reinstall(old);
          }
        });
    apply(dirty, readd, false);
  }

  /** Milliseconds since group {@code id} was added. */
  public long groupAgeMillis(int id) {
    return Math.max(0, clock.getAsLong() - groupCreated.getOrDefault(id, clock.getAsLong()));
  }

  /** Number of virtual rules whose actions use group {@code id}. */
  public int groupRefs(int id) {
    return RuleSelect.usingGroup(rules.values(), id).size();
  }

  private void modify(OFFlowMod fm, boolean strict) throws OfError {
    int table = table(fm, false);
    List<VirtualRule> sel = RuleSelect.forFlowMod(rules.values(), fm, table, strict, false);
    List<VirtualRule> updated = new ArrayList<>();
    for (VirtualRule r : sel) {
      VirtualRule n = r.withInstructions(fm.getInstructions());
      setOrder.check(n);
      updated.add(n);
    }
    Map<VirtualRule.Key, Translated> ts = translateChange(sel, updated);
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    Set<PhysRule.Key> readd = new HashSet<>();
    boolean reset = fm.getFlags().contains(OFFlowModFlags.RESET_COUNTS);
    for (int i = 0; i < updated.size(); i++) {
      VirtualRule n = updated.get(i);
      VirtualRule was = sel.get(i);
      refusals.onUndo(
          () -> {
            if (rules.get(n.key()) == n) {
              reinstall(was);
            }
          });
      putRule(n);
      Translated t = ts.remove(n.key());
      trans.set(n.key(), t, dirty);
      if (reset) {
        t.phys().forEach(p -> readd.add(p.key()));
        removals.forget(n.key());
      }
    }
    ts.forEach((k, t) -> trans.set(k, t, dirty)); // relying rules re-translated
    refreshDispatch(dirty);
    apply(dirty, readd, false);
  }

  private void delete(OFFlowMod fm, boolean strict) throws OfError {
    int table = table(fm, true);
    removeRules(
        RuleSelect.forFlowMod(rules.values(), fm, table, strict, true), OFFlowRemovedReason.DELETE);
  }

  private void removeRules(List<VirtualRule> victims, OFFlowRemovedReason reason) {
    if (victims.isEmpty()) {
      return;
    }
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    List<FlowRemovals.Removal> reports = new ArrayList<>();
    VlanPushOrder.Depths pushed = pushOrder.depths();
    for (VirtualRule r : victims) {
      VirtualRule.Key k = r.key();
      if (r.flags().contains(OFFlowModFlags.SEND_FLOW_REM)) {
        FlowRemovals.Removal rm = removals.begin(r, reason);
        for (PhysRule p : trans.of(k)) {
          PhysicalState.Installed i = phys.flows(p.sw()).get(p.key());
          if (i != null) {
            removals.expect(rm, i.cookie());
          }
        }
        reports.add(rm);
      }
      removeRule(k);
      trans.set(k, null, dirty);
      removals.forget(k);
      idle.forget(k);
    }
    retranslateShallower(pushed, dirty);
    refreshDispatch(dirty);
    apply(dirty, Set.of(), false);
    for (FlowRemovals.Removal rm : reports) {
      if (rm.waiting()) {
        exec.schedule(rm::finish, 3, TimeUnit.SECONDS); // a replica's switch went away
      } else {
        rm.finish();
      }
    }
  }

  // ------------------------------------------------------------------ groups

  public void groupMod(OFGroupMod gm) throws OfError {
    metrics.groupMods.incrementAndGet();
    try {
      doGroupMod(gm);
    } catch (OfError e) {
      metrics.translationErrors.incrementAndGet();
      throw e;
    }
  }

  private void doGroupMod(OFGroupMod gm) throws OfError {
    int id = gm.getGroup().getGroupNumber();
    boolean all = gm.getGroup().equals(OFGroup.ALL);
    if (!all && Integer.compareUnsigned(id, OFGroup.MAX.getGroupNumber()) > 0) {
      throw new OfError(OFGroupModFailedCode.INVALID_GROUP, "group " + gm.getGroup());
    }
    if (Translator.isScaleGroup(id)
        || WriteActionSet.isCarrierGroup(id)
        || GroupLabels.isVariant(id)) {
      throw new OfError(
          OFGroupModFailedCode.INVALID_GROUP,
          "group ids 0x"
              + Integer.toHexString(Translator.SCALE_GROUP_BASE)
              + "..+"
              + Translator.SCALE_GROUP_COUNT
              + " are reserved for OneSwitch");
    }
    switch (gm.getCommand()) {
      case ADD, MODIFY -> {
        if (all) {
          throw new OfError(OFGroupModFailedCode.INVALID_GROUP, "group ALL");
        }
        boolean exists = groups.containsKey(id);
        if (gm.getCommand() == org.projectfloodlight.openflow.protocol.OFGroupModCommand.ADD
            && exists) {
          throw new OfError(OFGroupModFailedCode.GROUP_EXISTS, "group " + id + " exists");
        }
        if (gm.getCommand() == org.projectfloodlight.openflow.protocol.OFGroupModCommand.MODIFY
            && !exists) {
          throw new OfError(OFGroupModFailedCode.UNKNOWN_GROUP, "group " + id + " unknown");
        }
        VirtualGroup g = new VirtualGroup(id, gm.getGroupType(), gm.getBuckets());
        if (g.type() == org.projectfloodlight.openflow.protocol.OFGroupType.INDIRECT
            && g.buckets().size() != 1) {
          throw new OfError(OFGroupModFailedCode.BAD_BUCKET, "indirect group needs one bucket");
        }
        putGroup(g);
      }
      case DELETE -> deleteGroups(all ? new ArrayList<>(groups.keySet()) : List.of(id));
      default -> throw new OfError(OFGroupModFailedCode.BAD_COMMAND, "" + gm.getCommand());
    }
  }

  private void deleteGroups(List<Integer> ids) {
    List<VirtualRule> victims = new ArrayList<>();
    for (VirtualRule r : rules.values()) {
      if (RuleSelect.usesGroup(r, ids::contains)) {
        victims.add(r);
      }
    }
    removeRules(victims, OFFlowRemovedReason.GROUP_DELETE);
    for (int g : ids) {
      if (groups.remove(g) != null) {
        groupCreated.remove(g);
        trans.setGroup(g, null, null);
      }
    }
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    refreshDispatch(dirty);
    apply(dirty, Set.of(), false);
  }

  void putGroup(VirtualGroup g) throws OfError {
    Set<Long> used = new HashSet<>();
    boolean existed = groups.containsKey(g.groupId());
    VirtualGroup old = groups.get(g.groupId());
    groups.put(g.groupId(), g); // translation and the check of its rules see the new buckets
    Map<String, List<OFBucket>> t;
    Map<VirtualRule.Key, Translated> users;
    try {
      t = translateGroup(g, ports, used);
      try {
        users = translateRulesUsing(g.groupId());
      } catch (OfError e) {
        used.forEach(tags::release);
        throw new OfError(OFGroupModFailedCode.BAD_BUCKET, e.getMessage());
      }
    } catch (OfError e) {
      if (existed) {
        groups.put(g.groupId(), old);
      } else {
        groups.remove(g.groupId());
      }
      throw e;
    }
    if (!existed) {
      groupCreated.put(g.groupId(), clock.getAsLong());
    }
    trans.setGroup(g.groupId(), t, used);
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    users.forEach((k, tr) -> trans.set(k, tr, dirty)); // label variants follow the buckets
    refreshDispatch(dirty);
    refusals.onUndo(
        () -> {
          if (groups.get(g.groupId()) != g) {
            return;
          }
          if (old == null) {
            deleteGroups(List.of(g.groupId()));
            return;
          }
          try {
            putGroup(old);
          } catch (OfError e) {
            LOG.error("rollback: cannot restore group {}: {}", g.groupId(), e.getMessage());
            deleteGroups(List.of(g.groupId()));
          }
        });
    apply(dirty, Set.of(), false);
  }

  /**
   * Translations of the rules using group {@code id} as it is now (a label variant's labels follow
   * its buckets); throws, tags given back, if one no longer translates.
   */
  private Map<VirtualRule.Key, Translated> translateRulesUsing(int id) throws OfError {
    Map<VirtualRule.Key, Translated> out = new LinkedHashMap<>();
    try {
      for (VirtualRule r : RuleSelect.usingGroup(rules.values(), id)) {
        out.put(r.key(), translate(r, ports));
      }
      return out;
    } catch (OfError e) {
      out.values().forEach(t -> t.tagVports().forEach(tags::release));
      throw e;
    }
  }

  /** The controller group a physical group id stands for (itself, or a label variant's group). */
  public int groupOfPhysical(int id) {
    return GroupLabels.isVariant(id) ? trans.carriers().groupOfVariant(id) : id;
  }

  // ------------------------------------------------------------------ packet-out / packet-in

  public void packetOut(OFPacketOut po) throws OfError {
    Set<Long> used = new HashSet<>();
    Translator.PhysPacketOut out;
    try {
      out = translator(ports, used).packetOut(po);
    } catch (OfError e) {
      used.forEach(tags::release);
      metrics.translationErrors.incrementAndGet();
      throw e;
    }
    // Tags used only by this packet: make sure the egress dispatch rules exist first.
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    refreshDispatch(dirty);
    CompletableFuture<Void> ready =
        used.isEmpty() ? CompletableFuture.completedFuture(null) : apply(dirty, Set.of(), true);
    ready.whenCompleteAsync(
        (x, e) -> {
          SouthSwitch s = south.get(out.sw());
          if (s != null) {
            s.send(out.msg(), s.nextXid());
            s.flush();
            metrics.packetOuts.incrementAndGet();
          }
          if (!used.isEmpty()) {
            // Keep the delivery rules while the packet may still be crossing the PCIe link.
            exec.schedule(
                () -> {
                  used.forEach(tags::release);
                  Set<PhysRule.Key> d2 = new LinkedHashSet<>();
                  refreshDispatch(d2);
                  apply(d2, Set.of(), false);
                },
                1,
                TimeUnit.SECONDS);
          }
        },
        exec);
  }

  /** Runs {@code r} on the core thread, logging (never losing) an unexpected exception. */
  private void onCore(Runnable r) {
    exec.execute(
        () -> {
          try {
            r.run();
          } catch (RuntimeException e) {
            LOG.error("core task failed: {}", e.toString(), e);
          }
        });
  }

  @Override
  public void packetIn(SouthSwitch sw, OFPacketIn pin) {
    onCore(
        () -> {
          PhysicalState.Installed i = phys.byCookie(pin.getCookie().getValue());
          if (i == null || i.owner() == null) {
            return;
          }
          VirtualRule r = rules.get(i.owner());
          if (r == null) {
            return;
          }
          Translator t = plainTranslator();
          t.packetIn(sw.id(), pin, U64.of(r.cookie()))
              .ifPresent(
                  m -> {
                    metrics.packetIns.incrementAndGet();
                    broadcast(m, true);
                  });
        });
  }

  private void broadcast(OFMessage m, boolean unusedMasterOnly) {
    for (Session s : sessions) {
      if (s.wants(m)) {
        s.send(m);
      }
    }
  }

  @Override
  public void flowRemoved(SouthSwitch sw, OFFlowRemoved fr) {
    onCore(
        () -> {
          long c = fr.getCookie().getValue();
          long p = fr.getPacketCount().getValue();
          long b = fr.getByteCount().getValue();
          if (removals.removed(c, p, b, rules::containsKey)) {
            return;
          }
          PhysicalState.Installed i = phys.byCookie(c);
          if (i != null) {
            LOG.warn("switch {}: flow {} removed behind our back, reinstalling", sw.id(), c);
            apply(Set.of(i.rule().key()), Set.of(i.rule().key()), false);
          }
        });
  }

  @Override
  public void error(SouthSwitch sw, OFErrorMsg err) {
    onCore(() -> physicalError(sw.id(), err));
  }

  /**
   * A physical switch refused a message. If it belongs to a controller's flow-mod/group-mod, fail
   * closed: that controller gets an OFPT_ERROR for ITS message (the switch's type/code) and the
   * virtual change is rolled back on every switch, so virtual and physical state agree again.
   */
  private void physicalError(String sw, OFErrorMsg err) {
    metrics.physicalErrors.incrementAndGet();
    Refusals.Undo u = refusals.refused(sw, err.getXid());
    if (u == null) {
      LOG.warn("switch {}: error {}", sw, err);
      return;
    }
    metrics.physicalRefusals.incrementAndGet();
    Enum<?> code = OfError.codeOf(err);
    Origin o = u.origin();
    LOG.warn(
        "switch {}: refused part of controller {}'s message xid {} ({}): rolling it back",
        sw,
        o.session().name(),
        o.xid(),
        code);
    o.session().send(OfError.build(F, code, o.xid(), o.head()));
    u.rollBack();
  }

  // ------------------------------------------------------------------ ports

  /** The virtual port description of v (state from its physical port). */
  public OFPortDesc portDesc(VPort v) {
    SouthSwitch s = south.get(v.sw());
    OFPortDesc p = s == null || !s.isReady() ? null : s.ports().get(v.port());
    String name = v.name().length() > 15 ? v.name().substring(0, 15) : v.name();
    var b = F.buildPortDesc().setPortNo(OFPort.of(v.vport())).setName(name);
    if (p == null) {
      return b.setHwAddr(MacAddress.NONE)
          .setConfig(Set.of())
          .setState(EnumSet.of(OFPortState.LINK_DOWN))
          .build();
    }
    return b.setHwAddr(p.getHwAddr())
        .setConfig(p.getConfig())
        .setState(p.getState())
        .setCurr(p.getCurr())
        .setAdvertised(p.getAdvertised())
        .setSupported(p.getSupported())
        .setPeer(p.getPeer())
        .setCurrSpeed(p.getCurrSpeed())
        .setMaxSpeed(p.getMaxSpeed())
        .build();
  }

  private void portStatus(VPort v, OFPortReason reason) {
    broadcast(F.buildPortStatus().setReason(reason).setDesc(portDesc(v)).build(), false);
  }

  @Override
  public void portStatus(SouthSwitch sw, OFPortStatus ps) {
    int port = ps.getDesc().getPortNo().getPortNumber();
    onCore(
        () -> {
          ports.byPhysical(sw.id(), port).ifPresent(v -> portStatus(v, OFPortReason.MODIFY));
          if (ps.getReason() == OFPortReason.DELETE) {
            endDrainOfDeleted(new VPort.Loc(sw.id(), port));
          }
        });
  }

  /**
   * A draining port that was deleted (its NF instance stopped) drains no more: its window ends now,
   * so that a late frame in flight to it (Translator.leftPort) is sent on to the vport's new place
   * instead of to a port that is gone.
   */
  private void endDrainOfDeleted(VPort.Loc loc) {
    PortMap next = ports.withoutLeavingDrainsAt(loc);
    if (!next.equals(ports)) {
      endDrains(next, "drain of deleted port " + loc);
    }
  }

  /**
   * Re-translates for {@code next}, the port map without some drains (barriered, make-before-break:
   * their replicas and dispatch entries go); a failure is logged as {@code what}, never thrown.
   */
  private void endDrains(PortMap next, String what) {
    try {
      changeMap(next, null, null, 200)
          .whenComplete(
              (pc, e) -> {
                if (e != null) {
                  LOG.warn("{}: {}", what, e.toString());
                }
              });
    } catch (PortOpError e) {
      LOG.warn("{}: cannot re-translate ({})", what, e.getMessage());
    }
  }

  /** Result of a port-map change. */
  public record PortChange(
      int status, VPort from, VPort to, int rules, double durationMs, ApplyTrace trace) {
    PortChange(int status, VPort from, VPort to, int rules, double durationMs) {
      this(status, from, to, rules, durationMs, null);
    }
  }

  /** PUT /v1/ports/{vport}. */
  public CompletableFuture<PortChange> mapPort(int vport, String sw, int port, String name)
      throws PortOpError {
    checkPhysical(vport, sw, port);
    Optional<VPort> cur = ports.get(vport);
    if (cur.isPresent()) {
      if (cur.get().k() == 1 && cur.get().sw().equals(sw) && cur.get().port() == port) {
        return CompletableFuture.completedFuture(new PortChange(200, cur.get(), cur.get(), 0, 0));
      }
      throw new PortOpError(409, "vport", "vport " + vport + " is mapped elsewhere (use remap)");
    }
    VPort v =
        new VPort(vport, sw, port, name == null ? "v" + Integer.toUnsignedString(vport) : name);
    return changeMap(ports.with(v), null, v, 201)
        .thenApplyAsync(
            pc -> {
              portStatus(v, OFPortReason.ADD);
              return pc;
            },
            exec);
  }

  /** DELETE /v1/ports/{vport}. */
  public CompletableFuture<PortChange> unmapPort(int vport) throws PortOpError {
    VPort cur =
        ports.get(vport).orElseThrow(() -> new PortOpError(404, "vport", "vport not mapped"));
    return changeMap(ports.without(vport), cur, null, 200)
        .thenApplyAsync(
            pc -> {
              portStatus(cur, OFPortReason.DELETE);
              return pc;
            },
            exec);
  }

  /** POST /v1/ports/{vport}/remap without a drain window (the old port is gone at once). */
  public CompletableFuture<PortChange> remapPort(int vport, String sw, int port)
      throws PortOpError {
    return remapPort(vport, sw, port, 0);
  }

  /**
   * POST /v1/ports/{vport}/remap: make-before-break. The old port stays an ingress-only (draining)
   * port of {@code vport} for {@code drainMs} (0 = none).
   */
  public CompletableFuture<PortChange> remapPort(int vport, String sw, int port, long drainMs)
      throws PortOpError {
    PortRequests.checkDrainMs(drainMs);
    VPort cur =
        ports.get(vport).orElseThrow(() -> new PortOpError(404, "vport", "vport not mapped"));
    if (cur.k() == 1 && cur.sw().equals(sw) && cur.port() == port) {
      return CompletableFuture.completedFuture(new PortChange(200, cur, cur, 0, 0));
    }
    checkPhysical(vport, sw, port);
    return moveTo(cur, new VPort(vport, sw, port, cur.name()), drainMs);
  }

  /**
   * POST /v1/ports/{vport}/prepare: physical (sw, port) becomes an ingress-only port of {@code
   * vport} for {@code ms} (a prepared port: frames from it are in_port=vport, nothing is sent to
   * it), applied and barriered like a remap. A remap or set-instances to it within the window finds
   * its replicas, dispatch entry and tags in place: its make phase is empty and the switch-over is
   * one barrier round (the re-pointing). Without one it expires like a drain. Checked like a remap
   * target; a port the vport already uses is left as it is.
   */
  public CompletableFuture<PortChange> preparePort(int vport, String sw, int port, long ms)
      throws PortOpError {
    PortRequests.checkPrepareMs(ms);
    VPort cur =
        ports.get(vport).orElseThrow(() -> new PortOpError(404, "vport", "vport not mapped"));
    checkPhysical(vport, sw, port);
    if (cur.has(sw, port)) {
      return CompletableFuture.completedFuture(new PortChange(200, cur, cur, 0, 0));
    }
    VPort.Loc loc = new VPort.Loc(sw, port);
    long until = clock.getAsLong() + ms;
    for (Drain d : ports.drainsOf(vport)) {
      if (d.loc().equals(loc)) {
        until = Math.max(until, d.untilMs()); // a drain still running is not cut short
      }
    }
    return changeMap(ports.withDrains(List.of(new Drain(vport, loc, until, true))), cur, cur, 200);
  }

  /**
   * A remap or set-instances: {@code cur} becomes {@code n} make-before-break, ports leaving it
   * drain for {@code drainMs}; counted as a remap, PORT_STATUS(MODIFY) once applied.
   */
  private CompletableFuture<PortChange> moveTo(VPort cur, VPort n, long drainMs)
      throws PortOpError {
    return changeMap(withLeavers(ports.with(n), cur, n, drainMs), cur, n, 200)
        .thenApplyAsync(
            pc -> {
              metrics.remaps.incrementAndGet();
              portStatus(n, OFPortReason.MODIFY);
              return pc;
            },
            exec);
  }

  /**
   * PUT /v1/ports/{vport}/instances: {@code vport} is served by {@code instances} (1..16, distinct,
   * each checked like a remap target), applied make-before-break like a remap. One instance is a
   * plain remap. A field error names {@code instances[i].switch|port}.
   */
  public CompletableFuture<PortChange> setInstances(int vport, List<VPort.Loc> instances)
      throws PortOpError {
    return setInstances(vport, instances, 0);
  }

  /** As {@link #setInstances(int, List)}; a removed instance drains for {@code drainMs}. */
  public CompletableFuture<PortChange> setInstances(
      int vport, List<VPort.Loc> instances, long drainMs) throws PortOpError {
    PortRequests.checkDrainMs(drainMs);
    VPort cur =
        ports.get(vport).orElseThrow(() -> new PortOpError(404, "vport", "vport not mapped"));
    PortRequests.checkInstances(topo, ports, vport, instances);
    if (cur.instances().equals(instances)) {
      return CompletableFuture.completedFuture(new PortChange(200, cur, cur, 0, 0));
    }
    return moveTo(cur, VPort.of(vport, cur.name(), instances), drainMs);
  }

  /** Longest drain window a remap or set-instances call may ask for. */
  public static final long MAX_DRAIN_MS = PortRequests.MAX_WINDOW_MS;

  /**
   * {@code next} with the ports {@code cur} had and {@code n} has not as draining ports of the
   * vport for {@code drainMs}; the expiry is scheduled. A port mapped again is no drain (PortMap).
   */
  private PortMap withLeavers(PortMap next, VPort cur, VPort n, long drainMs) {
    if (drainMs <= 0) {
      return next;
    }
    long until = clock.getAsLong() + drainMs;
    List<Drain> d = new ArrayList<>();
    for (VPort.Loc l : cur.instances()) {
      if (!n.instances().contains(l)) {
        d.add(new Drain(cur.vport(), l, until));
      }
    }
    return d.isEmpty() ? next : next.withDrains(d);
  }

  /** The one pending drain-expiry timer (core thread only), null if none. */
  private java.util.concurrent.ScheduledFuture<?> drainTimer;

  /** Arms the drain timer for the earliest window end (keeps an earlier one). */
  private void scheduleDrainExpiry() {
    java.util.OptionalLong first = ports.drains().stream().mapToLong(Drain::untilMs).min();
    if (first.isEmpty()) {
      return;
    }
    long delay = Math.max(1, first.getAsLong() - clock.getAsLong() + 1);
    if (drainTimer != null && !drainTimer.isDone()) {
      if (drainTimer.getDelay(TimeUnit.MILLISECONDS) <= delay) {
        return;
      }
      drainTimer.cancel(false);
    }
    drainTimer =
        exec.schedule(
            () -> {
              drainTimer = null;
              expireDrains();
            },
            delay,
            TimeUnit.MILLISECONDS);
  }

  /**
   * Ends the drain windows that are over: a normal re-translation (barriered, make-before-break)
   * removes their replicas and dispatch entries. Runs on the core thread (its timer and tick).
   */
  void expireDrains() {
    PortMap next = ports.withoutDrainsUntil(clock.getAsLong());
    if (next.equals(ports)) {
      scheduleDrainExpiry(); // none over yet (the timer fired early by the clock): re-arm
      return;
    }
    endDrains(next, "drain expiry (retried on the next tick)");
  }

  private void checkPhysical(int vport, String sw, int port) throws PortOpError {
    PortRequests.checkPhysical(topo, ports, vport, sw, port);
  }

  /** Re-translates everything for a new port map and applies it make-before-break. */
  private CompletableFuture<PortChange> changeMap(PortMap next, VPort from, VPort to, int status)
      throws PortOpError {
    long t0 = System.nanoTime();
    ApplyTrace trace = new ApplyTrace();
    Map<VirtualRule.Key, Translated> ts = new LinkedHashMap<>();
    Map<Integer, Map<String, List<OFBucket>>> gts = new HashMap<>();
    Map<Integer, Set<Long>> gused = new HashMap<>();
    List<Integer> newIds;
    try {
      newIds = scaleIds.ensure(next);
    } catch (OfError e) {
      throw new PortOpError(409, "instances", e.getMessage());
    }
    try {
      for (VirtualGroup g : groups.values()) {
        Set<Long> used = new HashSet<>();
        gts.put(g.groupId(), translateGroup(g, next, used));
        gused.put(g.groupId(), used);
      }
      for (VirtualRule r : rules.values()) {
        ts.put(r.key(), translate(r, next));
      }
    } catch (OfError e) {
      ts.values().forEach(t -> t.tagVports().forEach(tags::release));
      gused.values().forEach(u -> u.forEach(tags::release));
      newIds.forEach(scaleIds::release);
      throw new PortOpError(
          409,
          to != null && to.k() > 1 ? "instances" : "vport",
          "cannot re-translate: " + e.getMessage());
    }
    // Every tag live before the change keeps a reference across it (see keepOrLinger).
    List<Long> held = new ArrayList<>(tags.live().keySet());
    for (long key : held) {
      try {
        tags.acquire(key);
      } catch (OfError e) {
        throw new IllegalStateException(e); // live: never allocates
      }
    }
    int affected = 0;
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    for (Map.Entry<VirtualRule.Key, Translated> e : ts.entrySet()) {
      if (!e.getValue().phys().equals(trans.of(e.getKey()))) {
        affected++;
      }
      trans.set(e.getKey(), e.getValue(), dirty);
    }
    for (Map.Entry<Integer, Map<String, List<OFBucket>>> e : gts.entrySet()) {
      trans.setGroup(e.getKey(), e.getValue(), gused.get(e.getKey()));
    }
    List<Long> linger = keepOrLinger(held);
    ports = next;
    scheduleDrainExpiry();
    refreshDispatch(dirty);
    for (String sw : executor.liveSwitches()) {
      dirty.addAll(phys.flows(sw).keySet());
    }
    final int n = affected;
    return apply(dirty, Set.of(), true, trace)
        .thenApplyAsync(
            x -> {
              double ms = ms(t0);
              if (!linger.isEmpty()) {
                exec.schedule(() -> releaseTags(linger), LINGER_MS, TimeUnit.MILLISECONDS);
              }
              scaleIds.releaseUnused(ports);
              if (quiet) {
                return new PortChange(status, from, to, n, ms, trace);
              }
              exec.execute( // after the answer: logging is no part of the change
                  () ->
                      LOG.info(
                          "port change {} -> {}: {} ms ({})",
                          from == null && to == null ? "(drain expiry)" : from,
                          to,
                          Math.round(ms * 100) / 100.0,
                          trace));
              return new PortChange(status, from, to, n, ms, trace);
            },
            exec);
  }

  /**
   * Gives back the extra reference a port change took on each tag in {@code held}, except on the
   * tags the new translation no longer uses: these stay live (their dispatch rules lead to the
   * vport's new place; a removed instance slot's to slot mod k) for {@link #LINGER_MS}, returned. A
   * frame already crossing PCIe with such a tag, or sent by a switch whose datapath still runs the
   * old actions for a moment, is delivered instead of dropped, and the deletion of its rules leaves
   * the remap's critical path (no break round for it).
   */
  private List<Long> keepOrLinger(List<Long> held) {
    List<Long> linger = new ArrayList<>();
    for (long key : held) {
      if (tags.refs(key) > 1) {
        tags.release(key);
      } else {
        linger.add(key);
      }
    }
    return linger;
  }

  private static double ms(long t0) {
    return (System.nanoTime() - t0) / 1e6;
  }

  /** How long a tag a port change stopped using stays routed (removed instance slots too). */
  static final long LINGER_MS = 2000;

  private void releaseTags(List<Long> keys) {
    keys.forEach(tags::release);
    Set<PhysRule.Key> d = new LinkedHashSet<>();
    refreshDispatch(d);
    apply(d, Set.of(), false);
  }

  /** Loads the initial port map (config) without touching switches (before start). */
  public void initPorts(List<VPort> initial) {
    ports = new PortMap(initial);
    try {
      scaleIds.ensure(ports);
    } catch (OfError e) {
      throw new IllegalArgumentException(e.getMessage());
    }
    refreshDispatch(new HashSet<>());
  }

  // ------------------------------------------------------------------ switch (re)connection

  @Override
  public void connected(SouthSwitch sw) {
    onCore(() -> reconcile(sw));
    onCore(
        () ->
            ports.all().stream()
                .filter(v -> v.on(sw.id()))
                .forEach(v -> portStatus(v, OFPortReason.MODIFY)));
  }

  @Override
  public void disconnected(SouthSwitch sw) {
    onCore(
        () -> {
          phys.forget(sw.id());
          ports.all().stream()
              .filter(v -> v.on(sw.id()))
              .forEach(v -> portStatus(v, OFPortReason.MODIFY));
        });
  }

  /** Makes a (re)connected switch hold exactly OneSwitch's flows and groups. */
  private void reconcile(SouthSwitch sw) {
    String id = sw.id();
    phys.forget(id);
    long mark = phys.cookieMark();
    sw.<OFGroupDescStatsReply>stats(F.buildGroupDescStatsRequest().setXid(sw.nextXid()).build())
        .thenAcceptAsync(
            replies -> {
              phys.groups(id).putAll(FlowDumps.groups(replies));
              Set<PhysRule.Key> dirty = new LinkedHashSet<>();
              trans.desired().keySet().stream().filter(k -> k.sw().equals(id)).forEach(dirty::add);
              PhysicalState.Plan p =
                  phys.plan(
                      trans.desired(),
                      trans.owners(),
                      dirty,
                      Set.of(),
                      desiredGroups(),
                      Set.of(id));
              execute(p, true).thenRunAsync(() -> deleteStale(sw, mark), exec);
            },
            exec)
        .exceptionally(
            e -> {
              LOG.warn("switch {}: reconcile failed: {}", id, e.toString());
              return null;
            });
  }

  /**
   * Deletes the flows on {@code sw} that are not OneSwitch's. A flow installed since the reconcile
   * began ({@code mark}) but no longer in the physical state is one a plan is deleting right now
   * (e.g. the break phase of a remap still waiting for its barrier): left to that plan, so the dump
   * cannot delete an old rule before its replacement is barriered.
   */
  private void deleteStale(SouthSwitch sw, long mark) {
    sw.<OFFlowStatsReply>stats(FlowDumps.request(sw, -1))
        .thenAcceptAsync(
            replies -> {
              Set<Long> ours = new HashSet<>();
              phys.flows(sw.id()).values().forEach(i -> ours.add(i.cookie()));
              Set<Long> stale = FlowDumps.stale(replies, ours, c -> phys.issuedSince(c, mark));
              for (long c : stale) {
                sw.send(PhysicalState.flowDelete(c), sw.nextXid());
              }
              sw.flush();
              LOG.info(
                  "switch {}: reconciled ({} flows ours, {} stale cookies deleted)",
                  sw.id(),
                  ours.size(),
                  stale.size());
            },
            exec);
  }

  // ------------------------------------------------------------------ counters

  /** Physical counters by cookie, from every connected switch. */
  public CompletableFuture<Map<Long, long[]>> physicalCounters() {
    return physicalCounters(null);
  }

  /** Physical counters by cookie of physical {@code tables} (null = all), every switch. */
  public CompletableFuture<Map<Long, long[]>> physicalCounters(Set<Integer> tables) {
    return FlowDumps.counters(south.values(), tables);
  }

  /** Counters of a virtual rule: retired replicas + live replicas. Call on the core thread. */
  public long[] countersOf(VirtualRule r, Map<Long, long[]> physCounters) {
    long[] sum = removals.retiredCounters(r.key());
    for (PhysRule p : trans.of(r.key())) {
      PhysicalState.Installed i = phys.flows(p.sw()).get(p.key());
      if (i != null) {
        long[] c = physCounters.get(i.cookie());
        if (c != null) {
          sum[0] += c[0];
          sum[1] += c[1];
        }
      }
    }
    return sum;
  }

  /** Rules selected by a flow/aggregate stats request. */
  public List<VirtualRule> selectForStats(
      TableId table,
      OFPort outPort,
      OFGroup outGroup,
      U64 cookie,
      U64 mask,
      org.projectfloodlight.openflow.protocol.match.Match match) {
    return RuleSelect.forStats(rules.values(), table, outPort, outGroup, cookie, mask, match);
  }

  public long now() {
    return clock.getAsLong();
  }

  // ------------------------------------------------------------------ timeouts

  private void tick() {
    try {
      long now = clock.getAsLong();
      List<VirtualRule> hard = new ArrayList<>();
      boolean anyIdle = false;
      Set<Integer> idleTables = new HashSet<>();
      for (VirtualRule r : rules.values()) {
        if (r.hardTimeout() > 0 && now - r.installedMillis() >= r.hardTimeout() * 1000L) {
          hard.add(r);
        } else if (r.idleTimeout() > 0) {
          anyIdle = true;
          idleTables.add(r.table() + 1);
        }
      }
      removeRules(hard, OFFlowRemovedReason.HARD_TIMEOUT);
      if (!ports.drains().isEmpty()) {
        expireDrains(); // a safety net for the per-drain timer
      }
      if (refusals.pending()) {
        barrierAll(); // forgets messages the switches accepted, for controllers sending no barriers
      }
      if (anyIdle && !idlePollRunning) {
        idlePollRunning = true;
        physicalCounters(idleTables)
            .whenCompleteAsync(
                (c, e) -> {
                  idlePollRunning = false;
                  if (c != null) {
                    checkIdle(c);
                  }
                },
                exec);
      }
    } catch (RuntimeException e) {
      LOG.error("timer: {}", e.toString(), e);
    }
  }

  private void checkIdle(Map<Long, long[]> counters) {
    List<VirtualRule> expired =
        idle.expired(rules.values(), r -> countersOf(r, counters), clock.getAsLong());
    removeRules(expired, OFFlowRemovedReason.IDLE_TIMEOUT);
  }

  // ------------------------------------------------------------------ persistence

  private void scheduleSave() {
    if (persistence == null || saveScheduled) {
      return;
    }
    saveScheduled = true;
    exec.schedule(this::saveNow, 1000, TimeUnit.MILLISECONDS);
  }

  public void saveNow() {
    saveScheduled = false;
    if (persistence == null) {
      return;
    }
    try {
      persistence.saveHex(
          new ArrayList<>(ports.all()), saved.flows(rules), saved.groups(groups.values()));
    } catch (Exception e) {
      LOG.error("cannot save state to {}: {}", persistence.file(), e.toString());
    }
  }

  /** Restores saved state (before any switch connects). Returns false if there was none. */
  public boolean restore() throws java.io.IOException {
    Persistence.State st = persistence == null ? null : persistence.load();
    if (st == null) {
      return false;
    }
    ports = new PortMap(st.ports());
    try {
      scaleIds.ensure(ports);
    } catch (OfError e) {
      throw new java.io.IOException("saved port map: " + e.getMessage(), e);
    }
    for (OFMessage m : st.groups()) {
      OFGroupAdd g = (OFGroupAdd) m;
      try {
        putGroup(SavedForm.group(g));
      } catch (OfError e) {
        LOG.error("saved group {} no longer valid: {}", g.getGroup(), e.getMessage());
      }
    }
    for (OFMessage m : st.flows()) {
      OFFlowAdd f = (OFFlowAdd) m;
      try {
        addRule(SavedForm.rule(f, clock.getAsLong()), false);
      } catch (OfError e) {
        // e.g. a rule the configured wire_vlans no longer lets cross PCIe: left out (fail closed).
        LOG.error(
            "saved flow table={} priority={} {} no longer valid, not restored ({}): {}",
            f.getTableId().getValue(),
            f.getPriority(),
            f.getMatch(),
            e.typeAndCode(),
            e.getMessage());
      }
    }
    Set<PhysRule.Key> dirty = new HashSet<>();
    refreshDispatch(dirty);
    LOG.info(
        "restored {} ports, {} flows, {} groups from {}",
        st.ports().size(),
        rules.size(),
        groups.size(),
        persistence.file());
    return true;
  }
}
