package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.IntFunction;
import net.uno.oneswitch.core.Translations.Translated;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.Carrier;
import net.uno.oneswitch.translate.CarrierTags;
import net.uno.oneswitch.translate.GroupLabels;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.Offload;
import net.uno.oneswitch.translate.Translator;
import net.uno.oneswitch.translate.VlanPushOrder;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteMetadata;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Virtual changes to physical changes. Translates the rules and groups of the {@link VirtualSwitch}
 * for a port map (taking flow-id tags, MPLS labels and OneSwitch's group ids as they need them),
 * keeps each one's physical form ({@link Translations}), and plans what every physical switch must
 * add, modify and delete to hold that form ({@link #plan}: ordered phases, make-before-break,
 * against what {@link PhysicalState} says is installed). Sends nothing: {@link PlanExecutor} does.
 * Core thread only.
 */
public final class Planner {
  private static final Logger LOG = LoggerFactory.getLogger(Planner.class);

  private final Topology topo;
  private final int nVirt;
  private final Carrier.Mode carrierMode;
  private final VirtualSwitch vs;
  private final CarrierTags tags = new CarrierTags();

  /** The ids of OneSwitch's SELECT groups of the scaled-out vports. */
  private final ScaleGroupIds scaleIds = new ScaleGroupIds();

  /** vport -> group id of OneSwitch's SELECT group, for every vport with several instances. */
  private final Map<Integer, Integer> scaleGroups = scaleIds.byVport();

  /** Each virtual rule's and group's physical form, and the dispatch rules of the live tags. */
  private final Translations trans = new Translations(tags);

  private final PhysicalState phys = new PhysicalState();

  /** Where each virtual table runs (README "Table offload"). */
  private Offload offload = Offload.NONE;

  /** The translations of a whole virtual switch for a new port map, not installed yet. */
  record MapTranslation(
      Map<VirtualRule.Key, Translated> rules,
      Map<Integer, Map<String, List<OFBucket>>> groups,
      Map<Integer, Set<Long>> groupTags,
      Translated handoffs,
      Offload offload) {}

  /** {@code carrierMode}: the flow-id carrier (config {@code carrier}). */
  Planner(Topology topo, int virtualTables, Carrier.Mode carrierMode, VirtualSwitch vs) {
    this.topo = topo;
    this.nVirt = virtualTables;
    this.carrierMode = carrierMode;
    this.vs = vs;
  }

  /** What OneSwitch believes each physical switch holds. */
  public PhysicalState physical() {
    return phys;
  }

  Translations translations() {
    return trans;
  }

  ScaleGroupIds scaleIds() {
    return scaleIds;
  }

  /**
   * Every physical flow switch {@code sw} should hold now (the translations and the dispatch
   * rules), whether or not it is connected: what a reconcile makes it hold.
   */
  public List<PhysRule> wanted(String sw) {
    List<PhysRule> out = new ArrayList<>();
    for (PhysRule r : trans.desired().values()) {
      if (r.sw().equals(sw)) {
        out.add(r);
      }
    }
    return out;
  }

  /** The physical rules of virtual rule {@code k} (empty if none). */
  public List<PhysRule> translationOf(VirtualRule.Key k) {
    return trans.of(k);
  }

  /** Live flow-id tags: tag key (Translator.tagKey: vport, instance slot) -> tag. */
  public Map<Long, Integer> liveTags() {
    return tags.live();
  }

  /** vport -> id of OneSwitch's SELECT group, for the vports with several instances. */
  public Map<Integer, Integer> scaleGroups() {
    return Map.copyOf(scaleGroups);
  }

  /** The controller group a physical group id stands for (itself, or a label variant's group). */
  public int groupOfPhysical(int id) {
    return GroupLabels.isVariant(id) ? trans.carriers().groupOfVariant(id) : id;
  }

  // ------------------------------------------------------------------ translating

  /**
   * A translator for {@code pm} and the VLAN depths {@code d}, looking groups up in {@code groups};
   * the tags it takes are recorded in {@code used}.
   */
  Translator translator(
      PortMap pm, VlanPushOrder.Depths d, IntFunction<VirtualGroup> groups, Set<Long> used) {
    return translator(pm, d, groups, used, offload);
  }

  /** As above, for the table placement {@code o}. */
  Translator translator(
      PortMap pm,
      VlanPushOrder.Depths d,
      IntFunction<VirtualGroup> groups,
      Set<Long> used,
      Offload o) {
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
            id -> groups.apply(id) != null,
            scaleGroups,
            groups)
        .carrier(carrierMode)
        .depth(d::at)
        .later(d::after)
        .groupLabels(trans.carriers()::variant)
        .offload(o, metaFacts());
  }

  /** Where each virtual table runs now. */
  public Offload offload() {
    return offload;
  }

  /**
   * What the rules do with metadata, for the handoff checks: looked up in the rules only when a
   * rule that writes or matches metadata asks (a scan of every rule).
   */
  private Offload.MetaFacts metaFacts() {
    return new Offload.MetaFacts() {
      @Override
      public boolean matchedFrom(int t) {
        for (VirtualRule r : vs.rules().values()) {
          if (r.table() >= t && r.match().isPartiallyMasked(MatchField.METADATA)
              || r.table() >= t && r.match().isExact(MatchField.METADATA)) {
            return true;
          }
        }
        return false;
      }

      @Override
      public boolean writtenBefore(int t) {
        for (VirtualRule r : vs.rules().values()) {
          if (r.table() < t
              && r.instructions().stream().anyMatch(i -> i instanceof OFInstructionWriteMetadata)) {
            return true;
          }
        }
        return false;
      }
    };
  }

  /** A translator of the current state, taking tags into {@code used}. */
  Translator translator(Set<Long> used) {
    return translator(vs.ports(), vs.depths(), vs::group, used);
  }

  /** A translator for lookups only (dispatch, packet-in, scale group buckets). */
  Translator lookup() {
    return new Translator(topo, vs.ports(), nVirt, v -> 0, g -> true, scaleGroups)
        .offload(offload, metaFacts());
  }

  private Translated translate(
      VirtualRule r, PortMap pm, VlanPushOrder.Depths d, IntFunction<VirtualGroup> groups)
      throws OfError {
    return translate(r, pm, d, groups, offload);
  }

  private Translated translate(
      VirtualRule r,
      PortMap pm,
      VlanPushOrder.Depths d,
      IntFunction<VirtualGroup> groups,
      Offload o)
      throws OfError {
    Set<Long> used = new HashSet<>();
    try {
      return new Translated(translator(pm, d.of(r), groups, used, o).rule(r), used);
    } catch (OfError e) {
      used.forEach(tags::release);
      throw e;
    }
  }

  /**
   * Translations of an edit's added rules and of the rules relying on a VLAN depth it changes (a
   * push changes how many headers a frame may carry into a table: those rules are re-translated,
   * deeper or back). On a failure gives the tags back and throws: a change that would make a
   * relying rule deeper than it can be carried is refused, naming that rule.
   */
  Map<VirtualRule.Key, Translated> translate(VirtualSwitch.RuleEdit e) throws OfError {
    VlanPushOrder.Depths before = e.before();
    VlanPushOrder.Depths after = e.after();
    PortMap pm = vs.ports();
    Map<VirtualRule.Key, Translated> out = new LinkedHashMap<>();
    for (var loc : offload.locations().entrySet()) {
      int t = loc.getKey();
      if (after.at(t) > before.at(t) && after.at(t) >= 2) {
        throw new OfError(
            org.projectfloodlight.openflow.protocol.OFBadActionCode.UNSUPPORTED_ORDER,
            "a VLAN pushed here may reach table "
                + t
                + " (it runs on "
                + loc.getValue()
                + ") with 2 headers, where the handoff's VLAN tag would be a third");
      }
    }
    try {
      for (VirtualRule r : e.added()) {
        out.put(r.key(), translate(r, pm, after, vs::group));
      }
      for (VirtualRule r : e.relying()) {
        try {
          out.put(r.key(), translate(r, pm, after, vs::group));
        } catch (OfError err) {
          int t = r.table();
          int next = Math.max(0, VlanPushOrder.setGoesOn(r));
          VlanPushOrder.Depths b = before.of(r);
          VlanPushOrder.Depths a = after.of(r);
          if (a.at(t) <= b.at(t) && a.after(next) <= b.after(next)) {
            continue; // shallower than it was: its deeper translation is still faithful
          }
          throw new OfError(
              err.code(),
              "a VLAN pushed here may reach table "
                  + t
                  + " with "
                  + Math.max(a.at(t), a.after(next))
                  + " headers, where rule priority="
                  + r.priority()
                  + " cannot then be carried: "
                  + err.getMessage());
        }
      }
      checkMaxRules(out);
      return out;
    } catch (OfError err) {
      giveBack(out.values());
      throw err;
    }
  }

  /**
   * Refuses (TABLE_FULL) translations that would put more physical rules on a switch than its
   * {@code max_rules} (config), where they add rules there: never half installed.
   */
  private void checkMaxRules(Map<VirtualRule.Key, Translated> ts) throws OfError {
    Map<String, Integer> delta = new HashMap<>();
    for (Map.Entry<VirtualRule.Key, Translated> e : ts.entrySet()) {
      e.getValue().phys().forEach(p -> delta.merge(p.sw(), 1, Integer::sum));
      trans.of(e.getKey()).forEach(p -> delta.merge(p.sw(), -1, Integer::sum));
    }
    for (Map.Entry<String, Integer> d : delta.entrySet()) {
      Integer max = topo.maxRules(d.getKey());
      int n = trans.count(d.getKey()) + d.getValue();
      if (max != null && d.getValue() > 0 && n > max) {
        throw new OfError(
            org.projectfloodlight.openflow.protocol.OFFlowModFailedCode.TABLE_FULL,
            "switch "
                + d.getKey()
                + " would hold "
                + n
                + " physical rules, above its max_rules "
                + max);
      }
    }
  }

  /**
   * After rules were removed: re-translates the rules relying on a depth that dropped (the VLAN
   * carrier again where it fits). A rule that fails keeps its deeper translation, which stays
   * faithful.
   */
  void retranslate(VirtualSwitch.Removal rm, Set<PhysRule.Key> dirty) {
    for (VirtualRule r : rm.relying()) {
      try {
        trans.set(r.key(), translate(r, vs.ports(), vs.depths(), vs::group), dirty);
      } catch (OfError e) {
        LOG.debug("rule {} keeps its deeper translation: {}", r.key(), e.getMessage());
      }
    }
  }

  /** Gives back the tags of translations that will not be installed. */
  void giveBack(Collection<Translated> ts) {
    ts.forEach(t -> t.tagVports().forEach(tags::release));
  }

  /** Installs translations: each rule's physical form is now its entry of {@code ts}. */
  void install(Map<VirtualRule.Key, Translated> ts, Set<PhysRule.Key> dirty) {
    ts.forEach((k, t) -> trans.set(k, t, dirty));
  }

  /** Rule {@code k} now translates to {@code t} (null: it is gone). */
  void install(VirtualRule.Key k, Translated t, Set<PhysRule.Key> dirty) {
    trans.set(k, t, dirty);
  }

  /**
   * Group {@code g}'s buckets on every switch for {@code pm}, with groups looked up in {@code
   * groups}.
   */
  private Map<String, List<OFBucket>> translateGroup(
      VirtualGroup g, PortMap pm, IntFunction<VirtualGroup> groups, Set<Long> used) throws OfError {
    Map<String, List<OFBucket>> out = new LinkedHashMap<>();
    try {
      Translator t = translator(pm, vs.depths(), groups, used);
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

  /** A group's translation and those of the rules using it, not installed yet. */
  record GroupTranslation(
      Map<String, List<OFBucket>> buckets,
      Set<Long> tags,
      Map<VirtualRule.Key, Translated> users) {}

  /**
   * Translates group {@code g} as it would be after a GROUP_MOD, and the rules using it (a label
   * variant's labels follow its buckets). The rules' failure is the group's BAD_BUCKET. Tags given
   * back on a failure.
   */
  GroupTranslation translateGroup(VirtualGroup g) throws OfError {
    IntFunction<VirtualGroup> with = id -> id == g.groupId() ? g : vs.group(id);
    Set<Long> used = new HashSet<>();
    Map<String, List<OFBucket>> buckets = translateGroup(g, vs.ports(), with, used);
    Map<VirtualRule.Key, Translated> users = new LinkedHashMap<>();
    try {
      for (VirtualRule r : vs.usingGroup(g.groupId())) {
        users.put(r.key(), translate(r, vs.ports(), vs.depths(), with));
      }
    } catch (OfError e) {
      giveBack(users.values());
      used.forEach(tags::release);
      throw new OfError(
          org.projectfloodlight.openflow.protocol.OFGroupModFailedCode.BAD_BUCKET, e.getMessage());
    }
    return new GroupTranslation(buckets, used, users);
  }

  /** Installs a group's translation (see {@link #translateGroup(VirtualGroup)}). */
  void installGroup(int id, GroupTranslation t, Set<PhysRule.Key> dirty) {
    trans.setGroup(id, t.buckets(), t.tags());
    install(t.users(), dirty);
  }

  /** Group {@code id} is gone: its buckets and tags. */
  void removeGroup(int id) {
    trans.setGroup(id, null, null);
  }

  // ------------------------------------------------------------------ port map changes

  /**
   * Gives every scaled-out vport of {@code next} a SELECT group id; returns the vports newly given
   * one (see {@link #translateFor}).
   */
  List<Integer> ensureScaleIds(PortMap next) throws OfError {
    return scaleIds.ensure(next);
  }

  /**
   * Translates every group and rule for port map {@code next}. On a failure gives back everything
   * it took (tags, and the scale group ids {@code newIds} given for {@code next}) and throws.
   */
  MapTranslation translateFor(PortMap next, List<Integer> newIds) throws OfError {
    return translateFor(next, newIds, offload);
  }

  /**
   * As above, for the table placement {@code o} too. A rule that cannot be carried under it is
   * named in the error.
   */
  MapTranslation translateFor(PortMap next, List<Integer> newIds, Offload o) throws OfError {
    Map<VirtualRule.Key, Translated> ts = new LinkedHashMap<>();
    Set<Long> hused = new HashSet<>();
    Map<Integer, Map<String, List<OFBucket>>> gts = new HashMap<>();
    Map<Integer, Set<Long>> gused = new HashMap<>();
    try {
      for (VirtualGroup g : vs.groups().values()) {
        Set<Long> used = new HashSet<>();
        gts.put(g.groupId(), translateGroup(g, next, vs::group, used));
        gused.put(g.groupId(), used);
      }
      for (VirtualRule r : vs.rules().values()) {
        ts.put(r.key(), translateNamed(r, next, o));
      }
      List<PhysRule> hand = translator(next, vs.depths(), vs::group, hused, o).handoffs();
      return new MapTranslation(ts, gts, gused, new Translated(hand, hused), o);
    } catch (OfError e) {
      giveBack(ts.values());
      hused.forEach(tags::release);
      gused.values().forEach(u -> u.forEach(tags::release));
      newIds.forEach(scaleIds::release);
      throw e;
    }
  }

  /**
   * Rule {@code r} translated for port map {@code next} and placement {@code o}; a rule that cannot
   * be carried under a placement is named in the error. Tags given back on a failure.
   */
  private Translated translateNamed(VirtualRule r, PortMap next, Offload o) throws OfError {
    try {
      return translate(r, next, vs.depths(), vs::group, o);
    } catch (OfError e) {
      if (!o.any() || e.getMessage().startsWith("table ")) {
        throw e;
      }
      throw new OfError(
          e.code(),
          e.getMessage().startsWith("rule table=")
              ? e.getMessage()
              : "rule table="
                  + r.table()
                  + " priority="
                  + r.priority()
                  + " "
                  + r.match()
                  + ": "
                  + e.getMessage());
    }
  }

  /**
   * Rule {@code r} alone translated under placement {@code o} (the current ports), not installed:
   * give it back ({@link #giveBack(Collection)}). Fails as {@link #translateFor} does for it.
   */
  Translated trialRule(VirtualRule r, Offload o) throws OfError {
    return translateNamed(r, vs.ports(), o);
  }

  /** Gives back everything a translation took (a trial: {@code GET /v1/tables}). */
  void giveBack(MapTranslation m) {
    giveBack(m.rules().values());
    m.handoffs().tagVports().forEach(tags::release);
    m.groupTags().values().forEach(u -> u.forEach(tags::release));
  }

  /**
   * Installs a port map's translation; returns how many rules' physical form changed. Call {@link
   * #holdTags} before and {@link #keepOrLinger} after.
   */
  int installAll(MapTranslation m, Set<PhysRule.Key> dirty) {
    int affected = 0;
    for (Map.Entry<VirtualRule.Key, Translated> e : m.rules().entrySet()) {
      if (!e.getValue().phys().equals(trans.of(e.getKey()))) {
        affected++;
      }
      trans.set(e.getKey(), e.getValue(), dirty);
    }
    for (Map.Entry<Integer, Map<String, List<OFBucket>>> e : m.groups().entrySet()) {
      trans.setGroup(e.getKey(), e.getValue(), m.groupTags().get(e.getKey()));
    }
    trans.setHandoffs(m.handoffs(), dirty);
    offload = m.offload();
    return affected;
  }

  /** Takes one more reference on every live tag (see {@link #keepOrLinger}); returns them. */
  List<Long> holdTags() {
    List<Long> held = new ArrayList<>(tags.live().keySet());
    for (long key : held) {
      try {
        tags.acquire(key);
      } catch (OfError e) {
        throw new IllegalStateException(e); // live: never allocates
      }
    }
    return held;
  }

  /**
   * Gives back the extra reference {@link #holdTags} took on each tag in {@code held}, except on
   * the tags the new translation no longer uses: these stay live (their dispatch rules lead to the
   * vport's new place; a removed instance slot's to slot mod k) until {@link #releaseTags}, and are
   * returned. A frame already crossing PCIe with such a tag, or sent by a switch whose datapath
   * still runs the old actions for a moment, is delivered instead of dropped, and the deletion of
   * its rules leaves the port change's critical path (no break round for it).
   */
  List<Long> keepOrLinger(List<Long> held) {
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

  /** Gives back one reference on each tag of {@code keys}. */
  void releaseTags(Collection<Long> keys) {
    keys.forEach(tags::release);
  }

  // ------------------------------------------------------------------ planning

  /** Makes the dispatch rules those of the live tags under the current port map. */
  void refreshDispatch(Set<PhysRule.Key> dirty) {
    trans.refreshDispatch(vs.ports(), offload, this::lookup, dirty);
  }

  /** The groups each switch should hold now. */
  public Map<String, Map<Integer, GroupSpec>> desiredGroups() {
    Map<String, Map<Integer, GroupSpec>> out = new HashMap<>();
    for (VirtualGroup g : vs.groups().values()) {
      Map<String, List<OFBucket>> t = trans.groupBuckets(g.groupId());
      for (Map.Entry<String, List<OFBucket>> e : t.entrySet()) {
        out.computeIfAbsent(e.getKey(), k -> new TreeMap<>())
            .put(g.groupId(), new GroupSpec(g.type(), e.getValue()));
      }
    }
    PortMap ports = vs.ports();
    trans.carriers().addGroups(topo, ports, scaleGroups, vs::group, tags::tagOf, out);
    // OneSwitch's SELECT group of each scaled-out vport, on every switch whose tags are live.
    Translator t = lookup();
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

  /**
   * The physical changes that bring keys {@code dirty} (and every group) to the translations on the
   * switches {@code live}; {@code readd} keys are re-added (fresh counters) even when unchanged.
   * The installed state is updated as planned.
   */
  PhysicalState.Plan plan(Set<PhysRule.Key> dirty, Set<PhysRule.Key> readd, Set<String> live) {
    return phys.plan(trans.desired(), trans.owners(), dirty, readd, desiredGroups(), live);
  }

  /** Every physical rule switch {@code sw} should hold, planned against what it holds. */
  PhysicalState.Plan planSwitch(String sw) {
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    trans.desired().keySet().stream().filter(k -> k.sw().equals(sw)).forEach(dirty::add);
    return plan(dirty, Set.of(), Set.of(sw));
  }

  /** Every physical rule key currently installed on the switches {@code live}. */
  void addInstalled(Set<String> live, Set<PhysRule.Key> dirty) {
    for (String sw : live) {
      dirty.addAll(phys.flows(sw).keySet());
    }
  }
}
