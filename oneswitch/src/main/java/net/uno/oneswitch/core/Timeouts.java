package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.LongSupplier;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFFlowRemovedReason;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The core's 1 s tick. Timeouts are kept in OneSwitch (physical rules carry none): a hard timeout
 * by the clock, an idle one by polling the physical counters of the tables holding idle rules (a
 * rule is idle only when all its replicas are). The tick is also the safety net of the drain
 * timers, and sends a barrier when physical messages of controller messages wait for one (so their
 * refusal records are forgotten for controllers that send no barriers). Core thread only.
 */
final class Timeouts {
  private static final Logger LOG = LoggerFactory.getLogger(Timeouts.class);

  private final VirtualSwitch vs;
  private final FlowMods flows;
  private final PortChanges portChanges;
  private final Counters counters;
  private final IdleTimeouts idle;
  private final Refusals refusals;
  private final PlanExecutor executor;
  private final ScheduledExecutorService exec;
  private final LongSupplier clock;
  private boolean idlePollRunning;

  Timeouts(
      VirtualSwitch vs,
      FlowMods flows,
      PortChanges portChanges,
      Counters counters,
      IdleTimeouts idle,
      Refusals refusals,
      PlanExecutor executor,
      ScheduledExecutorService exec,
      LongSupplier clock) {
    this.vs = vs;
    this.flows = flows;
    this.portChanges = portChanges;
    this.counters = counters;
    this.idle = idle;
    this.refusals = refusals;
    this.executor = executor;
    this.exec = exec;
    this.clock = clock;
  }

  void tick() {
    try {
      long now = clock.getAsLong();
      List<VirtualRule> hard = new ArrayList<>();
      boolean anyIdle = false;
      Set<Integer> idleTables = new HashSet<>();
      for (VirtualRule r : vs.rules().values()) {
        if (r.hardTimeout() > 0 && now - r.installedMillis() >= r.hardTimeout() * 1000L) {
          hard.add(r);
        } else if (r.idleTimeout() > 0) {
          anyIdle = true;
          idleTables.add(r.table() + 1);
        }
      }
      flows.removeRules(hard, OFFlowRemovedReason.HARD_TIMEOUT);
      if (!vs.ports().drains().isEmpty()) {
        portChanges.expireDrains(); // a safety net for the per-drain timer
      }
      if (refusals.pending()) {
        executor.barrierAll(false, null);
      }
      if (anyIdle && !idlePollRunning) {
        idlePollRunning = true;
        counters
            .physicalCounters(idleTables)
            .whenCompleteAsync(
                (c, e) -> {
                  idlePollRunning = false;
                  if (c != null) {
                    checkIdle(c);
                  }
                },
                exec);
      }
    } catch (RuntimeException e) {
      LOG.error("timer: {}", e.toString(), e);
    }
  }

  private void checkIdle(Map<Long, long[]> physCounters) {
    List<VirtualRule> expired =
        idle.expired(
            vs.rules().values(), r -> counters.countersOf(r, physCounters), clock.getAsLong());
    flows.removeRules(expired, OFFlowRemovedReason.IDLE_TIMEOUT);
  }
}
