package net.uno.oneswitch.core;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import net.uno.oneswitch.model.PhysRule;

/**
 * Brings the physical switches to the translations after a change: the {@link Planner} plans, the
 * {@link PlanExecutor} sends. Replicas a plan deletes while their virtual rule lives on keep their
 * final counters for it ({@link FlowRemovals#retiring}), handoff rules theirs for the TABLE
 * statistics ({@link FlowRemovals#retiringHandoff}), and the changed state is saved soon. Core
 * thread only.
 */
final class PhysicalSync {
  private final VirtualSwitch vs;
  private final Planner planner;
  private final PlanExecutor executor;
  private final FlowRemovals removals;
  private final Runnable changed;

  /** While held (a bundle being applied): the keys to plan at release, else null. */
  private Set<PhysRule.Key> heldDirty;

  private Set<PhysRule.Key> heldReadd;

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
    return apply(dirty, readd, barriers, trace, 0);
  }

  /** As above; the break phase waits {@code breakDelayMs} after the modify phase. */
  CompletableFuture<Void> apply(
      Set<PhysRule.Key> dirty,
      Set<PhysRule.Key> readd,
      boolean barriers,
      ApplyTrace trace,
      long breakDelayMs) {
    return apply(dirty, readd, barriers, trace, breakDelayMs, List.of(), null, -1);
  }

  /**
   * As above; the modify messages of the switches {@code modifyFirst} go first, one barriered stage
   * each ({@link PhysicalState.Plan#modifyFirst}).
   */
  CompletableFuture<Void> apply(
      Set<PhysRule.Key> dirty,
      Set<PhysRule.Key> readd,
      boolean barriers,
      ApplyTrace trace,
      long breakDelayMs,
      List<String> modifyFirst,
      Set<String> takeOver,
      int movedTable) {
    if (heldDirty != null) {
      if (barriers) {
        throw new IllegalStateException("a barriered apply while held");
      }
      heldDirty.addAll(dirty);
      heldReadd.addAll(readd);
      return CompletableFuture.completedFuture(null);
    }
    PhysicalState.Plan p = planner.plan(dirty, readd, executor.liveSwitches());
    p.modifyFirst = modifyFirst;
    p.takeOver = takeOver;
    p.movedTable = movedTable;
    for (PhysicalState.Installed i : p.deleted) {
      if (i.owner() != null && vs.rule(i.owner()) != null) {
        removals.retiring(i.cookie(), i.owner());
      } else if (i.owner() == null && i.rule().isLate()) {
        removals.retiringHandoff(i.cookie(), i.rule().table());
      }
    }
    if (trace != null) {
      trace.planned();
    }
    changed.run();
    return executor.execute(p, barriers, trace, breakDelayMs);
  }

  /**
   * Holds every apply until {@link #release}: the changes of several messages (a bundle) are then
   * planned as one, so each switch gets them in one make-before-break order (adds, modifies, then
   * deletes) and never sees an intermediate state.
   */
  void hold() {
    if (heldDirty != null) {
      throw new IllegalStateException("already held");
    }
    heldDirty = new LinkedHashSet<>();
    heldReadd = new java.util.HashSet<>();
  }

  /** Plans and sends what was held since {@link #hold}, without barriers. */
  CompletableFuture<Void> release() {
    Set<PhysRule.Key> d = heldDirty;
    Set<PhysRule.Key> r = heldReadd;
    heldDirty = null;
    heldReadd = null;
    return apply(d, r, false, null);
  }

  /** Refreshes the dispatch rules (tags came or went) and applies, without barriers. */
  CompletableFuture<Void> dispatchChanged() {
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    planner.refreshDispatch(dirty);
    return apply(dirty, Set.of());
  }
}
