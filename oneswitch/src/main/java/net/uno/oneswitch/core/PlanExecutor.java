package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import net.uno.oneswitch.south.SouthSwitch;

/**
 * Sends plans to the physical switches: without barriers (flushed after the core's queued tasks),
 * or make-before-break, phase by phase, each phase's barriers answered before the next is sent.
 * Records which controller message each physical message comes from ({@link Refusals}) and forgets
 * it once a barrier covers it. Core thread only.
 */
final class PlanExecutor {
  private final Map<String, SouthSwitch> south;
  private final Refusals refusals;
  private final Metrics metrics;
  private final ScheduledExecutorService exec;
  private Set<String> liveSwitchSet = Set.of();
  private long liveSwitchMask = -1;
  private boolean flushPending;

  /** {@code south}: the physical switches by id (the core's map, read live). */
  PlanExecutor(
      Map<String, SouthSwitch> south,
      Refusals refusals,
      Metrics metrics,
      ScheduledExecutorService exec) {
    this.south = south;
    this.refusals = refusals;
    this.metrics = metrics;
    this.exec = exec;
  }

  /**
   * The state of physical switch {@code sw} if OneSwitch connects to it and it is not connected now
   * (down, or not connected yet); empty if it is connected or not one of the switches OneSwitch
   * drives (a scratch core's: WarmUp, unit tests without switches).
   */
  Optional<SouthSwitch.Status> down(String sw) {
    SouthSwitch s = south.get(sw);
    if (s == null || s.isReady()) {
      return Optional.empty();
    }
    return Optional.of(s.status());
  }

  /** The switches connected now (read-only; rebuilt only when one came or went). */
  Set<String> liveSwitches() {
    long mask = 0; // which switches are ready, in order: runs for every flow-mod, allocates nothing
    int i = 0;
    for (SouthSwitch s : south.values()) {
      if (s.isReady()) {
        mask |= 1L << Math.min(i, 63);
      }
      i++;
    }
    if (mask != liveSwitchMask || south.size() > 63) {
      Set<String> out = new LinkedHashSet<>();
      for (SouthSwitch s : south.values()) {
        if (s.isReady()) {
          out.add(s.id());
        }
      }
      liveSwitchSet = Collections.unmodifiableSet(out);
      liveSwitchMask = mask;
    }
    return liveSwitchSet;
  }

  /**
   * Sends a plan. Barriered: make-before-break in four phases (make, unhand, modify, break), each
   * sent only once every switch has answered a barrier covering everything sent to it before (the
   * previous phase and any earlier message). A round trip is spent only where it confirms
   * something: on the switches a phase (or an earlier message) went to; an empty phase costs none.
   * The phase right before a break barriers every live switch afresh (see {@link
   * #barrierAll(boolean, ApplyTrace)}: that round trip also gives frames still crossing PCIe under
   * the old rules time to arrive).
   */
  CompletableFuture<Void> execute(PhysicalState.Plan p, boolean barriers, ApplyTrace trace) {
    return execute(p, barriers, trace, 0);
  }

  /**
   * As above; a barriered plan's break phase waits {@code breakDelayMs} more after the modify phase
   * (a table move's in-flight margin, {@code drain_ms}).
   */
  CompletableFuture<Void> execute(
      PhysicalState.Plan p, boolean barriers, ApplyTrace trace, long breakDelayMs) {
    if (!barriers) {
      send(p.groups);
      send(p.make);
      send(p.unhand);
      send(p.modify);
      send(p.remove);
      scheduleFlush();
      return CompletableFuture.completedFuture(null);
    }
    List<PhysicalState.Op> unhand = p.unhandNow();
    List<PhysicalState.Op> remove = p.breakOps();
    boolean breaks = !remove.isEmpty();
    List<List<PhysicalState.Op>> stages = p.modifyStages();
    // The last phase that sends something before a break barriers every switch afresh.
    boolean modifyFresh = breaks && !stages.isEmpty();
    boolean unhandFresh = breaks && stages.isEmpty() && !unhand.isEmpty();
    boolean makeFresh = breaks && stages.isEmpty() && unhand.isEmpty() && !p.make.isEmpty();
    // Scale groups first, alone: their barrier sets the selection method before a flow uses them.
    CompletableFuture<Void> groups =
        p.groups.isEmpty()
            ? CompletableFuture.completedFuture(null)
            : phase("groups", p.groups, false, trace);
    // A settle before each later phase; the break waits the longer of it and its drain window.
    boolean afterMake = !unhand.isEmpty() || !stages.isEmpty();
    CompletableFuture<Void> f =
        groups
            .thenComposeAsync(x -> phase("make", p.make, makeFresh, trace), exec)
            .thenComposeAsync(x -> delay(p.make.isEmpty() || !afterMake ? 0 : p.settleMs), exec)
            .thenComposeAsync(x -> phase("unhand", unhand, unhandFresh, trace), exec)
            .thenComposeAsync(
                x -> delay(unhand.isEmpty() || stages.isEmpty() ? 0 : p.settleMs), exec);
    for (int i = 0; i < stages.size(); i++) {
      List<PhysicalState.Op> stage = stages.get(i);
      boolean fresh = modifyFresh && i == stages.size() - 1;
      f = f.thenComposeAsync(x -> phase("modify", stage, fresh, trace), exec);
      if (i < stages.size() - 1) {
        f = f.thenComposeAsync(x -> delay(p.settleMs), exec);
      }
    }
    return f.thenComposeAsync(x -> delay(breaks ? Math.max(breakDelayMs, p.settleMs) : 0), exec)
        .thenComposeAsync(x -> phase("break", remove, false, trace), exec);
  }

  /** Completes on the core thread after {@code ms} (at once for 0). */
  private CompletableFuture<Void> delay(long ms) {
    if (ms <= 0) {
      return CompletableFuture.completedFuture(null);
    }
    CompletableFuture<Void> f = new CompletableFuture<>();
    exec.schedule(() -> f.complete(null), ms, java.util.concurrent.TimeUnit.MILLISECONDS);
    return f;
  }

  /**
   * Sends one phase; completes when every switch answered a barrier sent after it ({@code fresh}: a
   * new round trip on every switch, else only where something is unanswered).
   */
  private CompletableFuture<Void> phase(
      String name, List<PhysicalState.Op> ops, boolean fresh, ApplyTrace trace) {
    if (ops.isEmpty()) {
      return barrierAll(fresh, null);
    }
    if (trace != null) {
      trace.begin(name);
    }
    send(ops, trace);
    return barrierAll(fresh, trace)
        .thenRun(
            () -> {
              if (trace != null) {
                trace.end();
              }
            });
  }

  private void send(List<PhysicalState.Op> ops) {
    send(ops, null);
  }

  private void send(List<PhysicalState.Op> ops, ApplyTrace trace) {
    for (PhysicalState.Op op : ops) {
      SouthSwitch s = south.get(op.sw());
      if (s != null) {
        if (trace != null) {
          trace.message(op.sw());
        }
        long xid = s.nextXid();
        refusals.sent(op.sw(), xid);
        s.send(op.msg(), xid);
        metrics.physicalFlowMods.incrementAndGet();
      }
    }
  }

  private void flushAll() {
    if (!flushPending) {
      return;
    }
    flushPending = false;
    south.values().forEach(SouthSwitch::flush);
  }

  /**
   * Flushes after the tasks already queued on the core thread: a burst of flow-mods from a
   * controller (every message of one read is queued before the first runs) leaves in few large
   * writes instead of one write per message. Queued, not timed: a timer would cost the core thread
   * an extra wake-up per flow-mod + barrier round trip.
   */
  private void scheduleFlush() {
    if (!flushPending) {
      flushPending = true;
      exec.execute(this::flushAll);
    }
  }

  /**
   * Completes when every connected physical switch answered a barrier (errors ignored), on the core
   * thread after the switch's earlier errors were handled: a refusal reaches the controller before
   * the BARRIER_REPLY that covers its message. {@code fresh}: a new barrier round trip on every
   * switch, also one sent nothing since its last barrier. The phase before a remap's break uses it:
   * that round trip also gives packets still crossing the PCIe link under the old rules time to
   * arrive before the break (a switch the phase did not touch may still be forwarding such a
   * packet). The round trips it starts are timed into {@code trace} (may be null).
   */
  CompletableFuture<Void> barrierAll(boolean fresh, ApplyTrace trace) {
    List<CompletableFuture<Void>> fs = new ArrayList<>();
    for (SouthSwitch s : south.values()) {
      if (s.isReady()) {
        long mark = s.nextXid(); // every message sent before this barrier has a smaller xid
        String id = s.id();
        long sent = System.nanoTime();
        CompletableFuture<Void> b = s.barrier(fresh);
        if (trace != null && !b.isDone()) {
          b = b.whenComplete((x, e) -> trace.barrier(id, sent));
        }
        fs.add(b.exceptionally(e -> null).thenRunAsync(() -> refusals.accepted(id, mark), exec));
      }
    }
    return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]));
  }
}
