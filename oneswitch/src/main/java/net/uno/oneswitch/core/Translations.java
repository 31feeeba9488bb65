package net.uno.oneswitch.core;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.CarrierTags;
import net.uno.oneswitch.translate.Translator;
import org.projectfloodlight.openflow.protocol.OFBucket;

/**
 * The physical form of the virtual state: each virtual rule's physical rules (its replicas), each
 * virtual group's buckets per switch, the dispatch rules of the live flow-id tags, and which rule
 * or group holds which tag. {@link #desired()} and {@link #owners()} are what {@link PhysicalState}
 * plans against; every change names the physical rules it touched in {@code dirty}. Core thread
 * only.
 */
final class Translations {
  /** A virtual rule's physical rules and the flow-id tags (tag keys) its translation took. */
  record Translated(List<PhysRule> phys, Set<Long> tagVports) {}

  /** A group as a tag holder (rules hold tags under their own key). */
  private record GroupHolder(int id) {}

  /** The handoff rules of the table offload as a tag holder. */
  private record HandoffHolder() {}

  private final CarrierTags tags;

  /** The carrier groups of write_actions outputs the translated rules use, per switch. */
  private final CarrierRefs carriers = new CarrierRefs();

  private final Map<Object, Set<Long>> tagHolders = new HashMap<>();
  private final Map<VirtualRule.Key, List<PhysRule>> trans = new HashMap<>();
  private final Map<Integer, Map<String, List<OFBucket>>> groupTrans = new HashMap<>();
  private final Map<PhysRule.Key, PhysRule> desired = new HashMap<>();

  /** How many rules of {@link #desired} are on each switch (kept as it changes: max_rules). */
  private final Map<String, Integer> perSwitch = new HashMap<>();

  private final Map<PhysRule.Key, VirtualRule.Key> owners = new HashMap<>();
  private final Set<PhysRule.Key> dispatchKeys = new HashSet<>();
  private List<PhysRule> handoffs = List.of();
  private Object dispatchOffload;
  private PortMap dispatchPorts;
  private Map<Long, Integer> dispatchTags = Map.of();
  private long dispatchGeneration = -1;

  /** How many changes the physical form has had: see {@link #changes()}. */
  private long changes;

  /** {@code tags}: the allocator the translations' tags are given back to. */
  Translations(CarrierTags tags) {
    this.tags = tags;
  }

  private void want(PhysRule.Key k, PhysRule p) {
    changes++;
    if (desired.put(k, p) == null) {
      perSwitch.merge(k.sw(), 1, Integer::sum);
    }
  }

  private void unwant(PhysRule.Key k) {
    changes++;
    if (desired.remove(k) != null) {
      perSwitch.merge(k.sw(), -1, Integer::sum);
    }
  }

  /** A version of the physical form (equal values: the same desired rules, groups, handoffs). */
  long changes() {
    return changes;
  }

  /** How many physical rules OneSwitch wants on switch {@code sw}. */
  int count(String sw) {
    return perSwitch.getOrDefault(sw, 0);
  }

  /** The physical rules of virtual rule {@code k} (empty if none). */
  List<PhysRule> of(VirtualRule.Key k) {
    return trans.getOrDefault(k, List.of());
  }

  /** Every physical rule OneSwitch wants installed: replicas and dispatch rules. */
  Map<PhysRule.Key, PhysRule> desired() {
    return desired;
  }

  /** The virtual rule each replica of {@link #desired()} stands for (dispatch rules: none). */
  Map<PhysRule.Key, VirtualRule.Key> owners() {
    return owners;
  }

  /** The carrier groups the translated rules use. */
  CarrierRefs carriers() {
    return carriers;
  }

  /** The buckets per switch of virtual group {@code id} (null if it has no translation). */
  Map<String, List<OFBucket>> groupBuckets(int id) {
    return groupTrans.get(id);
  }

  /**
   * Virtual rule {@code k} now translates to {@code t} (null: removed); the tags of its previous
   * translation are given back after the new one took its own.
   */
  void set(VirtualRule.Key k, Translated t, Set<PhysRule.Key> dirty) {
    List<PhysRule> old = trans.remove(k);
    if (old != null) {
      for (PhysRule p : old) {
        carriers.unref(p);
        PhysRule.Key pk = p.key();
        unwant(pk);
        owners.remove(pk);
        dirty.add(pk);
      }
    }
    Set<Long> oldTags = tagHolders.remove(k);
    if (t != null) {
      trans.put(k, t.phys());
      for (PhysRule p : t.phys()) {
        carriers.ref(p);
        PhysRule.Key pk = p.key();
        want(pk, p);
        owners.put(pk, k);
        dirty.add(pk);
      }
      tagHolders.put(k, t.tagVports());
    }
    if (oldTags != null) {
      oldTags.forEach(tags::release);
    }
  }

  /**
   * Virtual group {@code id} now has buckets {@code t} (null: removed), holding tags {@code used}.
   */
  void setGroup(int id, Map<String, List<OFBucket>> t, Set<Long> used) {
    changes++;
    groupTrans.remove(id);
    Set<Long> oldTags = tagHolders.remove(new GroupHolder(id));
    if (t != null) {
      groupTrans.put(id, t);
      tagHolders.put(new GroupHolder(id), used);
    }
    if (oldTags != null) {
      oldTags.forEach(tags::release);
    }
  }

  /**
   * The handoff rules of the table offload are now {@code t} (no owner: they never show
   * northbound); the tags of the previous ones are given back after.
   */
  void setHandoffs(Translated t, Set<PhysRule.Key> dirty) {
    changes++;
    for (PhysRule p : handoffs) {
      unwant(p.key());
      dirty.add(p.key());
    }
    handoffs = t.phys();
    for (PhysRule p : handoffs) {
      want(p.key(), p);
      dirty.add(p.key());
    }
    Set<Long> old = tagHolders.put(new HandoffHolder(), t.tagVports());
    if (old != null) {
      old.forEach(tags::release);
    }
  }

  /** The dispatch rules per switch (how many). */
  Map<String, Integer> dispatchCounts() {
    Map<String, Integer> out = new HashMap<>();
    dispatchKeys.forEach(k -> out.merge(k.sw(), 1, Integer::sum));
    return out;
  }

  /** The handoff rules of the table offload. */
  List<PhysRule> handoffs() {
    return handoffs;
  }

  /**
   * Makes the dispatch rules those of the live tags under {@code ports} ({@code plain} gives a
   * lookup translator for them). Cheap when nothing changed since the last call: most flow-mods.
   */
  void refreshDispatch(
      PortMap ports, Object offload, Supplier<Translator> plain, Set<PhysRule.Key> dirty) {
    long gen = tags.generation();
    boolean sameOffload = offload.equals(dispatchOffload);
    if (ports == dispatchPorts && gen == dispatchGeneration && sameOffload) {
      return; // no tag came or went since the last look (most flow-mods): no copy of the tags
    }
    dispatchGeneration = gen;
    Map<Long, Integer> live = tags.live();
    if (ports == dispatchPorts && live.equals(dispatchTags) && sameOffload) {
      return; // same port map and tags: same dispatch rules
    }
    dispatchOffload = offload;
    dispatchPorts = ports;
    dispatchTags = live;
    for (PhysRule.Key k : dispatchKeys) {
      unwant(k);
      dirty.add(k);
    }
    dispatchKeys.clear();
    for (PhysRule p : plain.get().dispatch(live)) {
      PhysRule.Key pk = p.key();
      want(pk, p);
      dispatchKeys.add(pk);
      dirty.add(pk);
    }
  }
}
