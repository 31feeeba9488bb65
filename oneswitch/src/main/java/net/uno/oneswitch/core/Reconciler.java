package net.uno.oneswitch.core;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.LongPredicate;
import net.uno.oneswitch.south.SouthSwitch;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowStatsReply;
import org.projectfloodlight.openflow.protocol.OFGroupDescStatsReply;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Makes a (re)connected physical switch hold exactly OneSwitch's flows and groups, without a gap:
 * read its groups, add or modify the wanted groups and ADD every wanted flow with fresh cookies (an
 * ADD replaces an identical entry atomically), barrier, then delete the flows that are not
 * OneSwitch's and the unwanted groups. Core thread only.
 *
 * <p>A shared switch (an operator's bridge, config {@code shared}) keeps everything that is not
 * OneSwitch's: only flows whose cookie carries OneSwitch's marker ({@link PhysicalState#owned}: an
 * earlier run's leftovers) are deleted, each by its exact cookie, and only OneSwitch's groups are
 * planned ({@link PhysicalState#adopt}).
 */
final class Reconciler {
  private static final Logger LOG = LoggerFactory.getLogger(Reconciler.class);

  private final OFFactory f;
  private final Planner planner;
  private final PlanExecutor executor;
  private final ScheduledExecutorService exec;

  Reconciler(OFFactory f, Planner planner, PlanExecutor executor, ScheduledExecutorService exec) {
    this.f = f;
    this.planner = planner;
    this.executor = executor;
    this.exec = exec;
  }

  /** Switch {@code sw} went away: what it held is unknown until it reconnects. */
  void forget(SouthSwitch sw) {
    planner.physical().forget(sw.id());
  }

  /** Reconciles switch {@code sw}, which has just (re)connected. */
  void reconcile(SouthSwitch sw) {
    String id = sw.id();
    PhysicalState phys = planner.physical();
    phys.forget(id);
    long mark = phys.cookieMark();
    sw.<OFGroupDescStatsReply>stats(f.buildGroupDescStatsRequest().setXid(sw.nextXid()).build())
        .thenAcceptAsync(
            replies -> {
              Set<Integer> foreign = phys.adopt(id, FlowDumps.groups(replies), sw.shared());
              if (!foreign.isEmpty()) {
                LOG.info(
                    "switch {} (shared): {} group(s) not OneSwitch's left as they are: {}",
                    id,
                    foreign.size(),
                    foreign.stream().map(Integer::toUnsignedString).toList());
              }
              PhysicalState.Plan p = planner.planSwitch(id);
              executor.execute(p, true, null).thenRunAsync(() -> deleteStale(sw, mark), exec);
            },
            exec)
        .exceptionally(
            e -> {
              LOG.warn("switch {}: reconcile failed: {}", id, e.toString());
              return null;
            });
  }

  /**
   * Deletes the flows on {@code sw} that are not OneSwitch's (on a shared switch: only those that
   * carry its marker, an earlier run's; the operator's stay). A flow installed since the reconcile
   * began ({@code mark}) but no longer in the physical state is one a plan is deleting right now
   * (e.g. the break phase of a remap still waiting for its barrier): left to that plan, so the dump
   * cannot delete an old rule before its replacement is barriered. Each delete names one cookie
   * exactly (full mask, every table, any match).
   */
  private void deleteStale(SouthSwitch sw, long mark) {
    PhysicalState phys = planner.physical();
    boolean shared = sw.shared();
    sw.<OFFlowStatsReply>stats(FlowDumps.request(sw, -1))
        .thenAcceptAsync(
            replies -> {
              Set<Long> ours = new HashSet<>();
              phys.flows(sw.id()).values().forEach(i -> ours.add(i.cookie()));
              LongPredicate deletable = shared ? PhysicalState::owned : c -> true;
              Set<Long> stale =
                  FlowDumps.stale(replies, ours, c -> phys.issuedSince(c, mark), deletable);
              for (long c : stale) {
                sw.send(PhysicalState.flowDelete(c), sw.nextXid());
              }
              sw.flush();
              if (shared) {
                LOG.info(
                    "switch {} (shared): reconciled ({} flows ours, {} stale cookies of OneSwitch's"
                        + " deleted, {} flows not OneSwitch's left as they are)",
                    sw.id(),
                    ours.size(),
                    stale.size(),
                    FlowDumps.count(replies, c -> !PhysicalState.owned(c)));
              } else {
                LOG.info(
                    "switch {}: reconciled ({} flows ours, {} stale cookies deleted)",
                    sw.id(),
                    ours.size(),
                    stale.size());
              }
            },
            exec);
  }
}
