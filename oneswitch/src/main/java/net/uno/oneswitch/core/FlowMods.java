package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import net.uno.oneswitch.core.Translations.Translated;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.OFFlowRemovedReason;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The controllers' FLOW_MODs, and every other way a virtual rule comes or goes (a restored rule, a
 * timeout, a group delete, a rollback): the {@link VirtualSwitch} says what the message changes,
 * the {@link Planner} translates that change (a refusal leaves everything as it was), then it is
 * committed and synced to the switches. A switch's later refusal of a part of it rolls it back
 * ({@link Refusals}); a removed rule with SEND_FLOW_REM reports its replicas' summed counters
 * ({@link FlowRemovals}). Core thread only.
 */
public final class FlowMods {
  private static final Logger LOG = LoggerFactory.getLogger(FlowMods.class);

  private final VirtualSwitch vs;
  private final Planner planner;
  private final PhysicalSync sync;
  private final Refusals refusals;
  private final FlowRemovals removals;
  private final IdleTimeouts idle;
  private final Metrics metrics;
  private final ScheduledExecutorService exec;
  private final LongSupplier clock;

  /**
   * A trial (a bundle checked before it is applied, then rolled back): removals are undoable and
   * report nothing, and no counters or idle state are forgotten.
   */
  private boolean trial;

  FlowMods(
      VirtualSwitch vs,
      Planner planner,
      PhysicalSync sync,
      Refusals refusals,
      FlowRemovals removals,
      IdleTimeouts idle,
      Metrics metrics,
      ScheduledExecutorService exec,
      LongSupplier clock) {
    this.vs = vs;
    this.planner = planner;
    this.sync = sync;
    this.refusals = refusals;
    this.removals = removals;
    this.idle = idle;
    this.metrics = metrics;
    this.exec = exec;
    this.clock = clock;
  }

  /**
   * Applies a controller's FLOW_MOD: as {@link #flowMod(OFFlowMod)}, and if a physical switch later
   * refuses a part of it, {@code origin} gets an OFPT_ERROR and the change is rolled back.
   */
  public void flowMod(OFFlowMod fm, Origin origin) throws OfError {
    refusals.applying(origin, () -> flowMod(fm));
  }

  /** Applies a virtual FLOW_MOD; throws the OpenFlow error to answer with (state unchanged). */
  public void flowMod(OFFlowMod fm) throws OfError {
    long t0 = System.nanoTime();
    metrics.flowMods.incrementAndGet();
    try {
      switch (fm.getCommand()) {
        case ADD -> apply(vs.add(fm, clock.getAsLong()));
        case MODIFY -> apply(vs.modify(fm, false));
        case MODIFY_STRICT -> apply(vs.modify(fm, true));
        case DELETE -> removeRules(vs.selectDelete(fm, false), OFFlowRemovedReason.DELETE);
        case DELETE_STRICT -> removeRules(vs.selectDelete(fm, true), OFFlowRemovedReason.DELETE);
        default -> throw new OfError(OFFlowModFailedCode.BAD_COMMAND, "" + fm.getCommand());
      }
    } catch (OfError e) {
      metrics.translationErrors.incrementAndGet();
      throw e;
    } finally {
      metrics.flowModLatency((System.nanoTime() - t0) / 1e9);
    }
  }

  /** Starts or ends a trial ({@link #trial}). */
  void trial(boolean on) {
    trial = on;
  }

  /** Adds rule {@code r} (a restored rule, the warm-up): as a controller's ADD. */
  void addRule(VirtualRule r, boolean checkOverlap) throws OfError {
    apply(vs.add(r, checkOverlap));
  }

  /**
   * Translates an edit, then commits and syncs it. Each added rule can be undone if a switch
   * refuses a part of the controller message being applied: a new one is dropped, a replaced one
   * put back (unless a later message replaced it since: that one stands).
   */
  private void apply(VirtualSwitch.RuleEdit e) throws OfError {
    Map<VirtualRule.Key, Translated> ts = planner.translate(e);
    vs.commit(e);
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    Set<PhysRule.Key> readd = new HashSet<>();
    for (VirtualRule n : e.added()) {
      VirtualRule.Key key = n.key();
      VirtualRule was = e.replaced(key);
      refusals.onUndo(
          () -> {
            if (vs.rule(key) != n) {
              return;
            }
            if (was == null) {
              dropRule(key);
            } else {
              reinstall(was);
            }
          });
      Translated t = ts.remove(key);
      planner.install(key, t, dirty);
      if (e.newEntries() && !trial) {
        removals.forget(key);
        idle.forget(key);
      }
      if (e.resetCounters() && !trial) {
        t.phys().forEach(p -> readd.add(p.key())); // ADD over an identical entry clears counters
        removals.forget(key);
      }
    }
    planner.install(ts, dirty); // relying rules re-translated
    planner.refreshDispatch(dirty);
    sync.apply(dirty, readd);
  }

  /** Puts {@code old} back in place of whatever rule holds its key; drops the key if it fails. */
  private void reinstall(VirtualRule old) {
    VirtualRule.Key key = old.key();
    try {
      VirtualSwitch.RuleEdit e = vs.restore(old);
      Map<VirtualRule.Key, Translated> ts = planner.translate(e);
      vs.commit(e);
      Set<PhysRule.Key> dirty = new LinkedHashSet<>();
      planner.install(ts, dirty);
      planner.refreshDispatch(dirty);
      sync.apply(dirty, Set.of());
    } catch (OfError e) {
      LOG.error("rollback: cannot restore rule {}: {}", key, e.getMessage());
      dropRule(key);
    }
  }

  /** Removes a virtual rule without FLOW_REMOVED (the controller was told its ADD failed). */
  private void dropRule(VirtualRule.Key key) {
    VirtualSwitch.Removal rm = vs.remove(List.of(key));
    if (rm.removed().isEmpty()) {
      return;
    }
    uninstall(List.of(key), rm);
  }

  /**
   * Drops the translations of rules {@code keys}, just removed from the virtual switch ({@code
   * gone}), with their retired counters and idle state; re-translates the rules that relied on
   * them, then syncs.
   */
  private void uninstall(List<VirtualRule.Key> keys, VirtualSwitch.Removal gone) {
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    for (VirtualRule.Key k : keys) {
      planner.install(k, null, dirty);
      if (!trial) {
        removals.forget(k);
        idle.forget(k);
      }
    }
    planner.retranslate(gone, dirty);
    planner.refreshDispatch(dirty);
    sync.apply(dirty, Set.of());
  }

  /**
   * Removes rules for {@code reason}; each with SEND_FLOW_REM reports one FLOW_REMOVED once its
   * replicas reported theirs (3 s at most: a replica's switch may have gone away).
   */
  void removeRules(List<VirtualRule> victims, OFFlowRemovedReason reason) {
    if (victims.isEmpty()) {
      return;
    }
    if (trial) {
      for (VirtualRule r : victims) {
        refusals.onUndo(
            () -> {
              if (vs.rule(r.key()) == null) {
                reinstall(r);
              }
            });
      }
      List<VirtualRule.Key> keys = victims.stream().map(VirtualRule::key).toList();
      uninstall(keys, vs.remove(keys));
      return;
    }
    List<FlowRemovals.Removal> reports = new ArrayList<>();
    List<VirtualRule.Key> keys = new ArrayList<>();
    for (VirtualRule r : victims) {
      VirtualRule.Key k = r.key();
      keys.add(k);
      if (r.flags().contains(OFFlowModFlags.SEND_FLOW_REM)) {
        FlowRemovals.Removal rm = removals.begin(r, reason);
        for (PhysRule p : planner.translationOf(k)) {
          PhysicalState.Installed i = planner.physical().flows(p.sw()).get(p.key());
          if (i != null) {
            removals.expect(rm, i.cookie());
          }
        }
        reports.add(rm);
      }
    }
    uninstall(keys, vs.remove(keys));
    for (FlowRemovals.Removal rm : reports) {
      if (rm.waiting()) {
        exec.schedule(rm::finish, 3, TimeUnit.SECONDS); // a replica's switch went away
      } else {
        rm.finish();
      }
    }
  }
}
