package net.uno.oneswitch.core;

import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.LongSupplier;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.south.SouthSwitch;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * The virtual switch's statistics from the physical ones: a virtual rule's counters are the sum of
 * its live replicas' and of the replicas already removed ({@link FlowRemovals}); which rules a
 * statistics request selects; groups' age and users. Core thread only.
 */
public final class Counters {
  private final VirtualSwitch vs;
  private final Planner planner;
  private final FlowRemovals removals;
  private final Map<String, SouthSwitch> south;
  private final LongSupplier clock;

  Counters(
      VirtualSwitch vs,
      Planner planner,
      FlowRemovals removals,
      Map<String, SouthSwitch> south,
      LongSupplier clock) {
    this.vs = vs;
    this.planner = planner;
    this.removals = removals;
    this.south = south;
    this.clock = clock;
  }

  /** Physical counters by cookie, from every connected switch. */
  public CompletableFuture<Map<Long, long[]>> physicalCounters() {
    return physicalCounters(null);
  }

  /** Physical counters by cookie of physical {@code tables} (null = all), every switch. */
  public CompletableFuture<Map<Long, long[]>> physicalCounters(Set<Integer> tables) {
    return FlowDumps.counters(south.values(), tables);
  }

  /** Counters of a virtual rule: retired replicas + live replicas. */
  public long[] countersOf(VirtualRule r, Map<Long, long[]> physCounters) {
    long[] sum = removals.retiredCounters(r.key());
    for (PhysRule p : planner.translationOf(r.key())) {
      PhysicalState.Installed i = planner.physical().flows(p.sw()).get(p.key());
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

  /**
   * The physical tables that hold handoff rules of the table offload (a located table's slot on the
   * switches it does not run on).
   */
  public Set<Integer> handoffTables() {
    Set<Integer> out = new HashSet<>();
    planner.translations().handoffs().forEach(p -> out.add(p.table()));
    return out;
  }

  /**
   * Packets the handoff rules sent on, per physical table, the live ones' from {@code physCounters}
   * (by cookie): see {@link TableCounts}.
   */
  public Map<Integer, Long> handoffPackets(Map<Long, long[]> physCounters) {
    return handoffPackets(
        p -> {
          PhysicalState.Installed i = planner.physical().flows(p.sw()).get(p.key());
          return i == null ? null : physCounters.get(i.cookie());
        });
  }

  /**
   * Packets the handoff rules sent on, per physical table: the live ones', {@code countersOf}
   * giving each one's {packets, bytes} (null: not installed), and the deleted ones' final packets
   * (a move or a port change deletes handoff rules; the switches' table counters keep their
   * packets).
   */
  Map<Integer, Long> handoffPackets(Function<PhysRule, long[]> countersOf) {
    Map<Integer, Long> out = removals.retiredHandoffPackets();
    for (PhysRule p : planner.translations().handoffs()) {
      long[] c = countersOf.apply(p);
      if (c != null) {
        out.merge(p.table(), c[0], Long::sum);
      }
    }
    return out;
  }

  /** Rules selected by a flow/aggregate stats request. */
  public List<VirtualRule> selectForStats(
      TableId table, OFPort outPort, OFGroup outGroup, U64 cookie, U64 mask, Match match) {
    return RuleSelect.forStats(vs.rules().values(), table, outPort, outGroup, cookie, mask, match);
  }

  /** Milliseconds since group {@code id} was added. */
  public long groupAgeMillis(int id) {
    long now = clock.getAsLong();
    return Math.max(0, now - vs.groupCreated(id, now));
  }

  /** Number of virtual rules whose actions use group {@code id}. */
  public int groupRefs(int id) {
    return vs.usingGroup(id).size();
  }

  public long now() {
    return clock.getAsLong();
  }
}
