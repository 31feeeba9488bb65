package net.uno.oneswitch.core;

import java.util.Map;

/**
 * The virtual tables' TABLE statistics from the physical switches': virtual table t is physical
 * table t+1 on every switch, so its lookups and matches are those summed over the switches, less
 * the packets its handoff rules sent on. A handed-off packet is looked up (and matched, by the
 * handoff rule) in the table's slot on the switch that hands it off and looked up again in the same
 * table on the table's own switch (the handoff dispatch goes straight there), so without that it
 * would count twice; every other packet is looked up in a table on one switch only (the ingress
 * runs the replicated pipeline, the egress switch only pops the tag in table 0). The handoff rules
 * a move or a port change deleted count too (their final packets, from their FLOW_REMOVED): a
 * switch's table counters keep the packets they handed off.
 */
public final class TableCounts {
  private TableCounts() {}

  /**
   * {lookups, matches} of virtual table {@code t}: {@code physical} maps a physical table to its
   * {lookups, matches} summed over the switches, {@code handoff} to the packets its handoff rules
   * (live and deleted) sent on.
   */
  public static long[] of(int t, Map<Integer, long[]> physical, Map<Integer, Long> handoff) {
    long[] a = physical.getOrDefault(t + 1, new long[2]);
    long h = handoff.getOrDefault(t + 1, 0L);
    return new long[] {Math.max(0, a[0] - h), Math.max(0, a[1] - h)};
  }
}
