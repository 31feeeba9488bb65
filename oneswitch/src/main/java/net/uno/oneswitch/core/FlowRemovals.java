package net.uno.oneswitch.core;

import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowRemoved;
import org.projectfloodlight.openflow.protocol.OFFlowRemovedReason;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * The counters a virtual rule keeps across its physical replicas' removals, and the FLOW_REMOVED a
 * removed virtual rule reports: the sum of its replicas' final counters, sent once every replica
 * was reported gone (or {@link Removal#finish()} is called when a switch went away).
 *
 * <p>Two kinds of physical removal are told apart by the replica's cookie: one of a virtual rule
 * being removed ({@link #expect}), whose counters go into its report, and one of a replica a
 * re-translation retired while its virtual rule lives on ({@link #retiring}), whose counters are
 * kept so the virtual rule's statistics do not drop. Core thread only.
 *
 * <p>The handoff rules of the table offload have no virtual rule, but their packets are taken out
 * of the TABLE statistics ({@link TableCounts}): a deleted handoff rule's final packets are kept
 * per physical table ({@link #retiringHandoff}), since the switches' table counters keep counting
 * them.
 */
final class FlowRemovals {
  private final OFFactory factory;
  private final LongSupplier clock;
  private final Consumer<OFFlowRemoved> report;

  /** Counters of replicas retired while their virtual rule lives on. */
  private final Map<VirtualRule.Key, long[]> retired = new HashMap<>();

  /** Physical cookie of a retired replica -> its virtual rule, until its FLOW_REMOVED. */
  private final Map<Long, VirtualRule.Key> retiring = new HashMap<>();

  /** Physical cookie of a replica of a rule being removed -> that removal. */
  private final Map<Long, Removal> pending = new HashMap<>();

  /** Physical cookie of a handoff rule being deleted -> its physical table, until its report. */
  private final Map<Long, Integer> handoffsRetiring = new HashMap<>();

  /** Packets of the deleted handoff rules, per physical table. */
  private final Map<Integer, Long> handoffsRetired = new HashMap<>();

  /** {@code report} gets each finished FLOW_REMOVED (for the controllers that asked for it). */
  FlowRemovals(OFFactory factory, LongSupplier clock, Consumer<OFFlowRemoved> report) {
    this.factory = factory;
    this.clock = clock;
    this.report = report;
  }

  /** A virtual rule being removed, waiting for its replicas' FLOW_REMOVED counters. */
  final class Removal {
    private final VirtualRule rule;
    private final OFFlowRemovedReason reason;
    private long packets;
    private long bytes;
    private int remaining;
    private boolean sent;

    private Removal(VirtualRule rule, OFFlowRemovedReason reason) {
      this.rule = rule;
      this.reason = reason;
      long[] base = retired.get(rule.key());
      if (base != null) {
        packets = base[0];
        bytes = base[1];
      }
    }

    /** Whether replicas are still to report their counters. */
    boolean waiting() {
      return remaining > 0 && !sent;
    }

    /** Reports the removal with the counters gathered so far (once; later calls do nothing). */
    void finish() {
      if (sent) {
        return;
      }
      sent = true;
      long dur = Math.max(0, clock.getAsLong() - rule.installedMillis());
      report.accept(
          factory
              .buildFlowRemoved()
              .setCookie(U64.of(rule.cookie()))
              .setPriority(rule.priority())
              .setReason(reason)
              .setTableId(TableId.of(rule.table()))
              .setDurationSec(dur / 1000)
              .setDurationNsec((dur % 1000) * 1_000_000)
              .setIdleTimeout(rule.idleTimeout())
              .setHardTimeout(rule.hardTimeout())
              .setPacketCount(U64.of(packets))
              .setByteCount(U64.of(bytes))
              .setMatch(rule.match())
              .build());
    }
  }

  /** Starts the removal report of {@code rule}; its replicas are added with {@link #expect}. */
  Removal begin(VirtualRule rule, OFFlowRemovedReason reason) {
    return new Removal(rule, reason);
  }

  /** The replica with physical {@code cookie} reports into {@code rm} when it is removed. */
  void expect(Removal rm, long cookie) {
    pending.put(cookie, rm);
    rm.remaining++;
  }

  /**
   * The replica with physical {@code cookie} of the live rule {@code owner} is being deleted (a
   * re-translation replaced it): its final counters are kept for {@code owner}. Ignored for a
   * replica whose rule is being removed (its counters go into the removal's report).
   */
  void retiring(long cookie, VirtualRule.Key owner) {
    if (!pending.containsKey(cookie)) {
      retiring.put(cookie, owner);
    }
  }

  /**
   * The handoff rule with physical {@code cookie} in physical table {@code table} is being deleted:
   * its final packets are kept for that table's TABLE statistics.
   */
  void retiringHandoff(long cookie, int table) {
    handoffsRetiring.put(cookie, table);
  }

  /** Packets of the deleted handoff rules so far, per physical table (a copy). */
  Map<Integer, Long> retiredHandoffPackets() {
    return new HashMap<>(handoffsRetired);
  }

  /**
   * A switch reported the physical flow {@code cookie} removed with these final counters. Returns
   * true if it was expected (a removal's replica or a retired one); false for a flow OneSwitch did
   * not delete. {@code live}: whether a virtual rule still exists (a retired replica of a rule
   * removed since adds nothing).
   */
  boolean removed(long cookie, long packets, long bytes, Predicate<VirtualRule.Key> live) {
    Removal rm = pending.remove(cookie);
    if (rm != null) {
      rm.packets += packets;
      rm.bytes += bytes;
      if (--rm.remaining == 0) {
        rm.finish();
      }
      return true;
    }
    Integer handoffTable = handoffsRetiring.remove(cookie);
    if (handoffTable != null) {
      handoffsRetired.merge(handoffTable, packets, Long::sum);
      return true;
    }
    VirtualRule.Key owner = retiring.remove(cookie);
    if (owner == null) {
      return false;
    }
    if (live.test(owner)) {
      long[] base = retired.computeIfAbsent(owner, k -> new long[2]);
      base[0] += packets;
      base[1] += bytes;
    }
    return true;
  }

  /** Packets and bytes of {@code key}'s retired replicas (a new array). */
  long[] retiredCounters(VirtualRule.Key key) {
    long[] c = retired.get(key);
    return c == null ? new long[2] : c.clone();
  }

  /** Forgets the retired counters of {@code key} (removed, or its counters reset). */
  void forget(VirtualRule.Key key) {
    retired.remove(key);
  }
}
