package net.uno.oneswitch.core;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
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
              phys.groups(id).putAll(FlowDumps.groups(replies));
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
   * Deletes the flows on {@code sw} that are not OneSwitch's. A flow installed since the reconcile
   * began ({@code mark}) but no longer in the physical state is one a plan is deleting right now
   * (e.g. the break phase of a remap still waiting for its barrier): left to that plan, so the dump
   * cannot delete an old rule before its replacement is barriered.
   */
  private void deleteStale(SouthSwitch sw, long mark) {
    PhysicalState phys = planner.physical();
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
}
