package net.uno.oneswitch.core;

import java.util.HashMap;
import java.util.Map;
import java.util.OptionalInt;
import java.util.TreeMap;
import java.util.function.LongFunction;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.translate.WriteActionSet;

/**
 * Reference counts of the carrier groups ({@link WriteActionSet}) per switch: a carrier exists on a
 * switch exactly while a translated rule there uses it, and is derived again from the port map and
 * the live tags whenever the groups are planned (so a remap re-points it, and a reconcile after a
 * reconnect or restart recreates it).
 */
final class CarrierRefs {
  private final Map<String, Map<Integer, Integer>> refs = new HashMap<>();

  void ref(PhysRule p) {
    for (int id : WriteActionSet.carriersOf(p)) {
      refs.computeIfAbsent(p.sw(), k -> new HashMap<>()).merge(id, 1, Integer::sum);
    }
  }

  void unref(PhysRule p) {
    for (int id : WriteActionSet.carriersOf(p)) {
      Map<Integer, Integer> m = refs.get(p.sw());
      if (m != null && m.merge(id, -1, Integer::sum) <= 0) {
        m.remove(id);
      }
    }
  }

  /** Adds the used carrier groups, as they are for this port map, to {@code out}. */
  void addGroups(
      Topology topo,
      PortMap ports,
      Map<Integer, Integer> scaleGroups,
      LongFunction<OptionalInt> tagOf,
      Map<String, Map<Integer, GroupSpec>> out) {
    for (Map.Entry<String, Map<Integer, Integer>> e : refs.entrySet()) {
      String sw = e.getKey();
      for (int id : e.getValue().keySet()) {
        WriteActionSet.carrier(topo, ports, scaleGroups, id, sw, tagOf)
            .ifPresent(
                g ->
                    out.computeIfAbsent(sw, k -> new TreeMap<>())
                        .put(id, new GroupSpec(g.getKey(), g.getValue())));
      }
    }
  }
}
