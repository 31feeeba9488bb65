package net.uno.oneswitch.core;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFGroupAdd;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The virtual switch on disk ({@link Persistence}), written by a {@link JournalWriter} off the core
 * thread: every change is handed to the journal as it is made, and an acknowledgement (a
 * BARRIER_REPLY, a bundle's COMMIT_REPLY, a REST answer) waits for {@link #durable} (the records it
 * covers written); the whole state is snapshotted at most once per second after a change (and on
 * shutdown) and written as state.json, which empties the journal. Restored at start through the
 * same paths as a controller's messages, so a saved rule that is no longer valid is left out. Core
 * thread only (but {@link #close}).
 */
public final class StateStore {
  private static final Logger LOG = LoggerFactory.getLogger(StateStore.class);

  private final VirtualSwitch vs;
  private final Persistence persistence;
  private final JournalWriter writer;
  private final ScheduledExecutorService exec;
  private final LongSupplier clock;
  private boolean saveScheduled;

  /** {@code persistence}: null saves nothing (a scratch core, tests). */
  StateStore(
      VirtualSwitch vs,
      Persistence persistence,
      OFFactory f,
      ScheduledExecutorService exec,
      LongSupplier clock) {
    this.vs = vs;
    this.persistence = persistence;
    this.writer = persistence == null ? null : new JournalWriter(persistence, f, exec);
    this.exec = exec;
    this.clock = clock;
  }

  /** The state changed: journals the change now and saves the whole state within a second. */
  void changed() {
    journal();
    if (writer == null || saveScheduled) {
      return;
    }
    saveScheduled = true;
    exec.schedule(this::saveNow, 1000, TimeUnit.MILLISECONDS);
  }

  /**
   * Hands what changed since the last call (or save) to the journal writer, as one record. Called
   * after every change and before every acknowledgement (a rollback after a physical refusal
   * changes the state without a new plan).
   */
  public void journal() {
    VirtualSwitch.Changes c = vs.drainChanges();
    if (writer == null || c.isEmpty()) {
      return;
    }
    List<JournalWriter.Entry> entries = new ArrayList<>(c.rules().size() + 1);
    for (var e : c.rules().entrySet()) {
      VirtualRule now = vs.rule(e.getKey());
      entries.add(new JournalWriter.Flow(now != null ? now : e.getValue(), now == null));
    }
    for (int id : c.groups()) {
      VirtualGroup g = vs.group(id);
      entries.add(g != null ? new JournalWriter.Group(g) : new JournalWriter.GroupGone(id));
    }
    if (c.ports()) {
      entries.add(new JournalWriter.Ports(List.copyOf(vs.ports().all())));
    }
    writer.append(entries);
  }

  /**
   * Completes (on the core thread) once every change made so far is written to disk (in the kernel:
   * it survives OneSwitch's death): what an acknowledgement sent then covers.
   */
  public CompletableFuture<Void> durable() {
    journal();
    return writer == null ? CompletableFuture.completedFuture(null) : writer.written();
  }

  /**
   * Snapshots the whole state (on the core thread) for the writer to save as state.json. The future
   * completes once it is written (on the writer's thread: do not wait for it on the core thread).
   */
  public CompletableFuture<Void> saveNow() {
    saveScheduled = false;
    if (writer == null) {
      vs.drainChanges();
      return CompletableFuture.completedFuture(null);
    }
    journal(); // a save that fails leaves these in the journal
    return writer.save(
        new JournalWriter.Snapshot(
            List.copyOf(vs.ports().all()),
            new ArrayList<>(vs.rules().values()),
            new ArrayList<>(vs.groups().values())));
  }

  /** Writes what is handed over, then closes the journal (OneSwitch stops). Any thread. */
  public void close() {
    if (writer != null) {
      writer.close();
    }
  }

  /**
   * Restores the saved state (before any switch connects) into the parts that apply it. Returns
   * false if there was none.
   */
  boolean restore(PortChanges ports, GroupMods groupMods, FlowMods flowMods, Planner planner)
      throws IOException {
    Persistence.State st = persistence == null ? null : persistence.load();
    if (st == null) {
      return false;
    }
    try {
      ports.load(new PortMap(st.ports()));
    } catch (OfError e) {
      throw new IOException("saved port map: " + e.getMessage(), e);
    }
    for (OFMessage m : st.groups()) {
      OFGroupAdd g = (OFGroupAdd) m;
      try {
        groupMods.put(SavedForm.group(g));
      } catch (OfError e) {
        LOG.error("saved group {} no longer valid: {}", g.getGroup(), e.getMessage());
      }
    }
    for (OFMessage m : st.flows()) {
      OFFlowAdd f = (OFFlowAdd) m;
      try {
        flowMods.addRule(SavedForm.rule(f, clock.getAsLong()), false);
      } catch (OfError e) {
        // e.g. a rule the configured wire_vlans no longer lets cross PCIe: left out (fail closed).
        LOG.error(
            "saved flow table={} priority={} {} no longer valid, not restored ({}): {}",
            f.getTableId().getValue(),
            f.getPriority(),
            f.getMatch(),
            e.typeAndCode(),
            e.getMessage());
      }
    }
    planner.refreshDispatch(new LinkedHashSet<>());
    LOG.info(
        "restored {} ports, {} flows, {} groups from {}",
        st.ports().size(),
        vs.rules().size(),
        vs.groups().size(),
        persistence.file());
    return true;
  }
}
