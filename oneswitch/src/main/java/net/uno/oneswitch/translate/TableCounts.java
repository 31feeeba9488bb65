package net.uno.oneswitch.translate;

import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;

/**
 * Per virtual table, counters of the installed rules that matter to a cross-table check ({@link
 * ActionSetOrder}, {@link VlanPushOrder}): kept incrementally, so a query costs O(tables in use),
 * not O(rules).
 */
final class TableCounts {
  private final int slots;
  private final TreeMap<Integer, int[]> counts = new TreeMap<>();

  TableCounts(int slots) {
    this.slots = slots;
  }

  /** Adds {@code d} (+1 / -1) to counter {@code slot} of {@code table}. */
  void add(int table, int slot, int d) {
    if (d == 0) {
      return;
    }
    int[] c = counts.computeIfAbsent(table, t -> new int[slots]);
    c[slot] += d;
    if (Arrays.stream(c).allMatch(x -> x == 0)) {
      counts.remove(table);
    }
  }

  /**
   * The first table before (the lowest) or after {@code table} with a non-zero {@code slot}, or -1.
   */
  int first(int table, boolean before, int slot) {
    var m = before ? counts.headMap(table, false) : counts.tailMap(table, false);
    for (Map.Entry<Integer, int[]> e : m.entrySet()) {
      if (e.getValue()[slot] > 0) {
        return e.getKey();
      }
    }
    return -1;
  }
}
