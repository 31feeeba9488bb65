package net.uno.oneswitch.core;

import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import net.uno.oneswitch.model.PhysRule;

/**
 * Brings the physical switches to the translations after a change: the {@link Planner} plans, the
 * {@link PlanExecutor} sends. Replicas a plan deletes while their virtual rule lives on keep their
 * final counters for it ({@link FlowRemovals#retiring}), and the changed state is saved soon. Core
 * thread only.
 */
final class PhysicalSync {
  private final VirtualSwitch vs;
  private final Planner planner;
  private final PlanExecutor executor;
  private final FlowRemovals removals;
  private final Runnable changed;

  /** {@code changed}: called after every plan (the state is saved soon). */
  PhysicalSync(
      VirtualSwitch vs,
      Planner planner,
      PlanExecutor executor,
      FlowRemovals removals,
      Runnable changed) {
    this.vs = vs;
    this.planner = planner;
    this.executor = executor;
    this.removals = removals;
    this.changed = changed;
  }

  /**
   * Applies the changes of keys {@code dirty}, without barriers (see {@link #apply(Set, Set,
   * boolean, ApplyTrace)}).
   */
  CompletableFuture<Void> apply(Set<PhysRule.Key> dirty, Set<PhysRule.Key> readd) {
    return apply(dirty, readd, false, null);
  }

  /**
   * Plans the changes of keys {@code dirty} (and every group) and sends them: barriered phase by
   * phase (make-before-break) with {@code barriers}, else flushed after the core's queued tasks. A
   * barriered apply's time goes into {@code trace} (may be null).
   */
  CompletableFuture<Void> apply(
      Set<PhysRule.Key> dirty, Set<PhysRule.Key> readd, boolean barriers, ApplyTrace trace) {
    PhysicalState.Plan p = planner.plan(dirty, readd, executor.liveSwitches());
    for (PhysicalState.Installed i : p.deleted) {
      if (i.owner() != null && vs.rule(i.owner()) != null) {
        removals.retiring(i.cookie(), i.owner());
      }
    }
    if (trace != null) {
      trace.planned();
    }
    changed.run();
    return executor.execute(p, barriers, trace);
  }

  /** Refreshes the dispatch rules (tags came or went) and applies, without barriers. */
  CompletableFuture<Void> dispatchChanged() {
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    planner.refreshDispatch(dirty);
    return apply(dirty, Set.of());
  }
}
