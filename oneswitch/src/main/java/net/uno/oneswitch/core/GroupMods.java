package net.uno.oneswitch.core;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.LongSupplier;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFFlowRemovedReason;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The controllers' GROUP_MODs: the {@link VirtualSwitch} checks the message, the {@link Planner}
 * translates the group and the rules using it (a label variant's labels follow its buckets; a
 * change that would make one of them unfaithful is refused), then it is committed and synced. A
 * delete removes the rules using the group (FLOW_REMOVED GROUP_DELETE). Core thread only.
 */
public final class GroupMods {
  private static final Logger LOG = LoggerFactory.getLogger(GroupMods.class);

  private final VirtualSwitch vs;
  private final Planner planner;
  private final PhysicalSync sync;
  private final FlowMods flows;
  private final Refusals refusals;
  private final Metrics metrics;
  private final LongSupplier clock;

  GroupMods(
      VirtualSwitch vs,
      Planner planner,
      PhysicalSync sync,
      FlowMods flows,
      Refusals refusals,
      Metrics metrics,
      LongSupplier clock) {
    this.vs = vs;
    this.planner = planner;
    this.sync = sync;
    this.flows = flows;
    this.refusals = refusals;
    this.metrics = metrics;
    this.clock = clock;
  }

  /** As {@link #groupMod(OFGroupMod)}, answering {@code origin} on a physical refusal. */
  public void groupMod(OFGroupMod gm, Origin origin) throws OfError {
    refusals.applying(origin, () -> groupMod(gm));
  }

  /** Applies a virtual GROUP_MOD; throws the OpenFlow error to answer with (state unchanged). */
  public void groupMod(OFGroupMod gm) throws OfError {
    metrics.groupMods.incrementAndGet();
    try {
      VirtualSwitch.GroupEdit e = vs.groupMod(gm);
      if (e.group() != null) {
        put(e);
      } else {
        deleteGroups(e.deleted());
      }
    } catch (OfError e) {
      metrics.translationErrors.incrementAndGet();
      throw e;
    }
  }

  /** Puts group {@code g} (a restored group): as a controller's ADD or MODIFY. */
  void put(VirtualGroup g) throws OfError {
    put(vs.put(g));
  }

  private void put(VirtualSwitch.GroupEdit e) throws OfError {
    VirtualGroup g = e.group();
    VirtualGroup old = e.old();
    Planner.GroupTranslation t = planner.translateGroup(g);
    vs.commitGroup(g, clock.getAsLong());
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    planner.installGroup(g.groupId(), t, dirty);
    planner.refreshDispatch(dirty);
    refusals.onUndo(
        () -> {
          if (vs.group(g.groupId()) != g) {
            return;
          }
          if (old == null) {
            deleteGroups(List.of(g.groupId()));
            return;
          }
          try {
            put(old);
          } catch (OfError err) {
            LOG.error("rollback: cannot restore group {}: {}", g.groupId(), err.getMessage());
            deleteGroups(List.of(g.groupId()));
          }
        });
    sync.apply(dirty, Set.of());
  }

  /** Deletes groups {@code ids} and the rules using them. */
  private void deleteGroups(List<Integer> ids) {
    flows.removeRules(vs.usingGroups(ids), OFFlowRemovedReason.GROUP_DELETE);
    for (int g : ids) {
      if (vs.removeGroup(g)) {
        planner.removeGroup(g);
      }
    }
    sync.dispatchChanged();
  }
}
