package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Changes of the port map: map, unmap, remap, prepare and set-instances requests, and the drain and
 * prepare windows' ends. Each re-translates every rule and group for the new map ({@link
 * Planner#translateFor}) and applies the difference make-before-break, barriered phase by phase
 * (docs/translation.md, "Remap"). A request that cannot be carried is refused with a {@link
 * PortError} and changes nothing. Core thread only.
 */
public final class PortChanges {
  private static final Logger LOG = LoggerFactory.getLogger(PortChanges.class);

  /** Longest drain window a remap or set-instances call may ask for. */
  public static final long MAX_DRAIN_MS = PortRequests.MAX_WINDOW_MS;

  /** How long a tag a port change stopped using stays routed (removed instance slots too). */
  static final long LINGER_MS = 2000;

  private final Topology topo;
  private final VirtualSwitch vs;
  private final Planner planner;
  private final PhysicalSync sync;
  private final PlanExecutor executor;
  private final Controllers controllers;
  private final Metrics metrics;
  private final ScheduledExecutorService exec;
  private final LongSupplier clock;

  /** A scratch core's (WarmUp): its port changes are not logged. */
  boolean quiet;

  /** The one pending drain-expiry timer, null if none. */
  private ScheduledFuture<?> drainTimer;

  PortChanges(
      Topology topo,
      VirtualSwitch vs,
      Planner planner,
      PhysicalSync sync,
      PlanExecutor executor,
      Controllers controllers,
      Metrics metrics,
      ScheduledExecutorService exec,
      LongSupplier clock) {
    this.topo = topo;
    this.vs = vs;
    this.planner = planner;
    this.sync = sync;
    this.executor = executor;
    this.controllers = controllers;
    this.metrics = metrics;
    this.exec = exec;
    this.clock = clock;
  }

  /** Loads a port map (config, saved state) without touching switches (before start). */
  public void initPorts(List<VPort> initial) {
    try {
      load(new PortMap(initial));
    } catch (OfError e) {
      throw new IllegalArgumentException(e.getMessage());
    }
  }

  /** Makes {@code pm} the port map, before any rule or switch (start-up). */
  void load(PortMap pm) throws OfError {
    vs.setPorts(pm);
    planner.ensureScaleIds(pm);
    planner.refreshDispatch(new LinkedHashSet<>());
  }

  /** PUT /v1/ports/{vport}. */
  public CompletableFuture<PortChange> mapPort(int vport, String sw, int port, String name)
      throws PortError {
    PortRequests.checkPhysical(topo, vs.ports(), vport, sw, port);
    Optional<VPort> cur = vs.ports().get(vport);
    if (cur.isPresent()) {
      if (cur.get().k() == 1 && cur.get().sw().equals(sw) && cur.get().port() == port) {
        return CompletableFuture.completedFuture(PortChange.unchanged(cur.get()));
      }
      throw PortError.conflict("vport", "vport " + vport + " is mapped elsewhere (use remap)");
    }
    VPort v =
        new VPort(vport, sw, port, name == null ? "v" + Integer.toUnsignedString(vport) : name);
    return changeMap(vs.ports().with(v), null, v, true)
        .thenApplyAsync(
            pc -> {
              controllers.portStatus(v, OFPortReason.ADD);
              return pc;
            },
            exec);
  }

  private VPort mapped(int vport) throws PortError {
    return vs.ports().get(vport).orElseThrow(() -> PortError.notFound("vport", "vport not mapped"));
  }

  /** DELETE /v1/ports/{vport}. */
  public CompletableFuture<PortChange> unmapPort(int vport) throws PortError {
    VPort cur = mapped(vport);
    return changeMap(vs.ports().without(vport), cur, null, false)
        .thenApplyAsync(
            pc -> {
              controllers.portStatus(cur, OFPortReason.DELETE);
              return pc;
            },
            exec);
  }

  /** POST /v1/ports/{vport}/remap without a drain window (the old port is gone at once). */
  public CompletableFuture<PortChange> remapPort(int vport, String sw, int port) throws PortError {
    return remapPort(vport, sw, port, 0);
  }

  /**
   * POST /v1/ports/{vport}/remap: make-before-break. The old port stays an ingress-only (draining)
   * port of {@code vport} for {@code drainMs} (0 = none).
   */
  public CompletableFuture<PortChange> remapPort(int vport, String sw, int port, long drainMs)
      throws PortError {
    PortRequests.checkDrainMs(drainMs);
    VPort cur = mapped(vport);
    if (cur.k() == 1 && cur.sw().equals(sw) && cur.port() == port) {
      return CompletableFuture.completedFuture(PortChange.unchanged(cur));
    }
    PortRequests.checkPhysical(topo, vs.ports(), vport, sw, port);
    checkConnected("switch", sw);
    return moveTo(cur, new VPort(vport, sw, port, cur.name()), drainMs);
  }

  /**
   * POST /v1/ports/{vport}/prepare: physical (sw, port) becomes an ingress-only port of {@code
   * vport} for {@code ms} (a prepared port: frames from it are in_port=vport, nothing is sent to
   * it), applied and barriered like a remap. A remap or set-instances to it within the window finds
   * its replicas, dispatch entry and tags in place: its make phase is empty and the switch-over is
   * one barrier round (the re-pointing). Without one it expires like a drain. Checked like a remap
   * target; a port the vport already uses is left as it is.
   */
  public CompletableFuture<PortChange> preparePort(int vport, String sw, int port, long ms)
      throws PortError {
    PortRequests.checkPrepareMs(ms);
    VPort cur = mapped(vport);
    PortRequests.checkPhysical(topo, vs.ports(), vport, sw, port);
    if (cur.has(sw, port)) {
      return CompletableFuture.completedFuture(PortChange.unchanged(cur));
    }
    checkConnected("switch", sw);
    VPort.Loc loc = new VPort.Loc(sw, port);
    long until = clock.getAsLong() + ms;
    for (Drain d : vs.ports().drainsOf(vport)) {
      if (d.loc().equals(loc)) {
        until = Math.max(until, d.untilMs()); // a drain still running is not cut short
      }
    }
    PortMap next = vs.ports().withDrains(List.of(new Drain(vport, loc, until, true)));
    return changeMap(next, cur, cur, false);
  }

  /**
   * PUT /v1/ports/{vport}/instances: {@code vport} is served by {@code instances} (1..16, distinct,
   * each checked like a remap target), applied make-before-break like a remap. One instance is a
   * plain remap. A field error names {@code instances[i].switch|port}.
   */
  public CompletableFuture<PortChange> setInstances(int vport, List<VPort.Loc> instances)
      throws PortError {
    return setInstances(vport, instances, 0);
  }

  /** As {@link #setInstances(int, List)}; a removed instance drains for {@code drainMs}. */
  public CompletableFuture<PortChange> setInstances(
      int vport, List<VPort.Loc> instances, long drainMs) throws PortError {
    return setInstances(vport, instances, null, drainMs);
  }

  /**
   * As {@link #setInstances(int, List, long)} with the select bucket {@code weights} of the
   * instances (null: all equal). Only the weights changed: the scale groups are modified in place
   * (no drain, no dispatch change, no PORT_STATUS: the controller's port is the same).
   */
  public CompletableFuture<PortChange> setInstances(
      int vport, List<VPort.Loc> instances, List<Integer> weights, long drainMs) throws PortError {
    PortRequests.checkDrainMs(drainMs);
    VPort cur = mapped(vport);
    PortRequests.checkInstances(topo, vs.ports(), vport, instances);
    PortRequests.checkWeights(weights, instances.size());
    VPort n = VPort.of(vport, cur.name(), instances, weights);
    if (cur.equals(n)) {
      return CompletableFuture.completedFuture(PortChange.unchanged(cur));
    }
    if (cur.instances().equals(instances)) {
      return changeMap(vs.ports().with(n), cur, n, false);
    }
    for (int i = 0; i < instances.size(); i++) {
      checkConnected("instances[" + i + "].switch", instances.get(i).sw());
    }
    return moveTo(cur, n, drainMs);
  }

  /**
   * A port change may send a vport's traffic to switch {@code sw}: refused with 409 naming {@code
   * field} while OneSwitch is not connected to it (down, or not connected yet), and nothing
   * changes. Its rules could be installed there only once it is back, so its traffic would be lost
   * until then (a failover must pick a live place). Mapping a new vport there (PUT) is allowed: it
   * moves no traffic, and is installed when the switch connects.
   */
  private void checkConnected(String field, String sw) throws PortError {
    Optional<SouthSwitch.Status> d = executor.down(sw);
    if (d.isPresent()) {
      long ms = Math.max(0, System.currentTimeMillis() - d.get().sinceMs());
      throw PortError.conflict(
          field,
          "switch "
              + sw
              + " is disconnected ("
              + d.get().reason()
              + ", "
              + ms
              + " ms ago): no traffic can be moved there");
    }
  }

  /**
   * A remap or set-instances: {@code cur} becomes {@code n} make-before-break, ports leaving it
   * drain for {@code drainMs}; counted as a remap, PORT_STATUS(MODIFY) once applied.
   */
  private CompletableFuture<PortChange> moveTo(VPort cur, VPort n, long drainMs) throws PortError {
    return changeMap(withLeavers(vs.ports().with(n), cur, n, drainMs), cur, n, false)
        .thenApplyAsync(
            pc -> {
              metrics.remaps.incrementAndGet();
              controllers.portStatus(n, OFPortReason.MODIFY);
              return pc;
            },
            exec);
  }

  // ------------------------------------------------------------------ drain and prepare windows

  /**
   * {@code next} with the ports {@code cur} had and {@code n} has not as draining ports of the
   * vport for {@code drainMs}. A port mapped again is no drain (PortMap). Nor is a port on a switch
   * that is down (a failover away from a dead sNIC): nothing can come from it, and its rules there
   * are gone; when the switch returns the reconcile installs what is wanted then, not the old
   * instance's replicas.
   */
  private PortMap withLeavers(PortMap next, VPort cur, VPort n, long drainMs) {
    if (drainMs <= 0) {
      return next;
    }
    long until = clock.getAsLong() + drainMs;
    List<Drain> d = new ArrayList<>();
    for (VPort.Loc l : cur.instances()) {
      if (!n.instances().contains(l) && executor.down(l.sw()).isEmpty()) {
        d.add(new Drain(cur.vport(), l, until, false, cur.instances().indexOf(l)));
      }
    }
    return d.isEmpty() ? next : next.withDrains(d);
  }

  /** Arms the drain timer for the earliest window end (keeps an earlier one). */
  private void scheduleDrainExpiry() {
    OptionalLong first = vs.ports().drains().stream().mapToLong(Drain::untilMs).min();
    if (first.isEmpty()) {
      return;
    }
    long delay = Math.max(1, first.getAsLong() - clock.getAsLong() + 1);
    if (drainTimer != null && !drainTimer.isDone()) {
      if (drainTimer.getDelay(TimeUnit.MILLISECONDS) <= delay) {
        return;
      }
      drainTimer.cancel(false);
    }
    drainTimer =
        exec.schedule(
            () -> {
              drainTimer = null;
              expireDrains();
            },
            delay,
            TimeUnit.MILLISECONDS);
  }

  /**
   * Ends the drain windows that are over: a normal re-translation (barriered, make-before-break)
   * removes their replicas and dispatch entries. Runs on its timer and on the 1 s tick.
   */
  void expireDrains() {
    PortMap next = vs.ports().withoutDrainsUntil(clock.getAsLong());
    if (next.equals(vs.ports())) {
      scheduleDrainExpiry(); // none over yet (the timer fired early by the clock): re-arm
      return;
    }
    endDrains(next, "drain expiry (retried on the next tick)");
  }

  /**
   * A draining port that was deleted (its NF instance stopped) drains no more: its window ends now,
   * so that a late frame in flight to it (Translator.leftPort) is sent on to the vport's new place
   * instead of to a port that is gone.
   */
  void endDrainOfDeleted(VPort.Loc loc) {
    PortMap next = vs.ports().withoutLeavingDrainsAt(loc);
    if (!next.equals(vs.ports())) {
      endDrains(next, "drain of deleted port " + loc);
    }
  }

  /**
   * Re-translates for {@code next}, the port map without some drains (barriered, make-before-break:
   * their replicas and dispatch entries go); a failure is logged as {@code what}, never thrown.
   */
  private void endDrains(PortMap next, String what) {
    try {
      changeMap(next, null, null, false)
          .whenComplete(
              (pc, e) -> {
                if (e != null) {
                  LOG.warn("{}: {}", what, e.toString());
                }
              });
    } catch (PortError e) {
      LOG.warn("{}: cannot re-translate ({})", what, e.getMessage());
    }
  }

  // ------------------------------------------------------------------ the change itself

  /** Re-translates everything for a new port map and applies it make-before-break. */
  private CompletableFuture<PortChange> changeMap(
      PortMap next, VPort from, VPort to, boolean created) throws PortError {
    long t0 = System.nanoTime();
    ApplyTrace trace = new ApplyTrace();
    List<Integer> newIds;
    try {
      newIds = planner.ensureScaleIds(next);
    } catch (OfError e) {
      throw PortError.conflict("instances", e.getMessage());
    }
    Planner.MapTranslation m;
    try {
      m = planner.translateFor(next, newIds);
    } catch (OfError e) {
      throw PortError.conflict(
          to != null && to.k() > 1 ? "instances" : "vport",
          "cannot re-translate: " + e.getMessage());
    }
    // Every tag live before the change keeps a reference across it (Planner.keepOrLinger).
    List<Long> held = planner.holdTags();
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    int affected = planner.installAll(m, dirty);
    List<Long> linger = planner.keepOrLinger(held);
    vs.setPorts(next);
    scheduleDrainExpiry();
    planner.refreshDispatch(dirty);
    planner.addInstalled(executor.liveSwitches(), dirty);
    return sync.apply(dirty, Set.of(), true, trace)
        .thenApplyAsync(
            x -> {
              double ms = (System.nanoTime() - t0) / 1e6;
              if (!linger.isEmpty()) {
                exec.schedule(() -> releaseTags(linger), LINGER_MS, TimeUnit.MILLISECONDS);
              }
              planner.scaleIds().releaseUnused(vs.ports());
              PortChange pc = new PortChange(created, from, to, affected, ms, trace);
              if (!quiet) {
                exec.execute( // after the answer: logging is no part of the change
                    () ->
                        LOG.info(
                            "port change {} -> {}: {} ms ({})",
                            from == null && to == null ? "(drain expiry)" : from,
                            to,
                            Math.round(ms * 100) / 100.0,
                            trace));
              }
              return pc;
            },
            exec);
  }

  private void releaseTags(List<Long> keys) {
    planner.releaseTags(keys);
    sync.dispatchChanged();
  }
}
