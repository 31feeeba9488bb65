package net.uno.oneswitch.core;

import java.util.HashMap;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.IntFunction;
import java.util.function.LongFunction;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.translate.GroupLabels;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.TagAllocator;
import net.uno.oneswitch.translate.WriteActionSet;
import org.projectfloodlight.openflow.protocol.OFGroupModFailedCode;

/**
 * Reference counts of OneSwitch's carrier groups per switch: the carrier groups of action sets
 * ({@link WriteActionSet}) and the MPLS label variants of the controller's groups ({@link
 * GroupLabels}). One exists on a switch exactly while a translated rule there uses it, and is
 * derived again from the port map, the controller's group and the live tags whenever the groups are
 * planned (so a remap re-points it, and a reconcile after a reconnect or restart recreates it).
 */
final class CarrierRefs {
  private final Map<String, Map<Integer, Integer>> refs = new HashMap<>();
  // Label variants: (group << 16 | ethertype) <-> id, given out by translation, freed when unused.
  private final TagAllocator variantIds = new TagAllocator(0, GroupLabels.COUNT - 1);
  private final Map<Integer, Long> variantOf = new HashMap<>();

  private static Set<Integer> idsOf(PhysRule p) {
    Set<Integer> ids = WriteActionSet.carriersOf(p);
    ids.addAll(GroupLabels.variantsOf(p));
    return ids;
  }

  void ref(PhysRule p) {
    for (int id : idsOf(p)) {
      refs.computeIfAbsent(p.sw(), k -> new HashMap<>()).merge(id, 1, Integer::sum);
    }
  }

  void unref(PhysRule p) {
    for (int id : idsOf(p)) {
      Map<Integer, Integer> m = refs.get(p.sw());
      if (m != null && m.merge(id, -1, Integer::sum) <= 0) {
        m.remove(id);
      }
    }
  }

  /** The label variant id of controller group {@code group} for ethertype {@code et}. */
  int variant(int group, int et) throws OfError {
    long key = (Integer.toUnsignedLong(group) << 16) | (et & 0xffff);
    OptionalInt id = variantIds.tagOf(key);
    if (id.isPresent()) {
      return GroupLabels.BASE + id.getAsInt();
    }
    try {
      int n = variantIds.acquire(key);
      variantOf.put(GroupLabels.BASE + n, key);
      return GroupLabels.BASE + n;
    } catch (OfError e) {
      throw new OfError(OFGroupModFailedCode.OUT_OF_GROUPS, "MPLS group variant ids exhausted");
    }
  }

  /** The controller group a label variant stands for. */
  int groupOfVariant(int id) {
    Long key = variantOf.get(id);
    return key == null ? id : (int) (key >>> 16);
  }

  /**
   * Adds the used carrier groups, as they are for this port map, to {@code out}; frees the ids of
   * label variants no rule uses any more (a translation given up, the rules gone).
   */
  void addGroups(
      Topology topo,
      PortMap ports,
      Map<Integer, Integer> scaleGroups,
      IntFunction<VirtualGroup> groups,
      LongFunction<OptionalInt> tagOf,
      Map<String, Map<Integer, GroupSpec>> out) {
    Set<Integer> used = new java.util.HashSet<>();
    for (Map.Entry<String, Map<Integer, Integer>> e : refs.entrySet()) {
      String sw = e.getKey();
      for (int id : e.getValue().keySet()) {
        if (GroupLabels.isVariant(id)) {
          used.add(id);
          Long key = variantOf.get(id);
          VirtualGroup g = key == null ? null : groups.apply((int) (key >>> 16));
          if (g != null) {
            GroupLabels.buckets(topo, ports, g, (int) (key & 0xffff), sw, tagOf)
                .ifPresent(
                    b ->
                        out.computeIfAbsent(sw, k -> new TreeMap<>())
                            .put(id, new GroupSpec(g.type(), b)));
          }
          continue;
        }
        WriteActionSet.carrier(topo, ports, scaleGroups, id, sw, tagOf)
            .ifPresent(
                g ->
                    out.computeIfAbsent(sw, k -> new TreeMap<>())
                        .put(id, new GroupSpec(g.getKey(), g.getValue())));
      }
    }
    for (Integer id : Set.copyOf(variantOf.keySet())) {
      if (!used.contains(id)) {
        variantIds.release(variantOf.remove(id));
      }
    }
  }
}
