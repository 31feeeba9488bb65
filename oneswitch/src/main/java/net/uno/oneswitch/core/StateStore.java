package net.uno.oneswitch.core;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
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
 * The virtual switch on disk ({@link Persistence}): every change is journaled at once (before the
 * barrier reply or REST answer that acknowledges it), the whole state saved at most once per second
 * after a change (and on shutdown), which empties the journal, and restored at start through the
 * same paths as a controller's messages, so a saved rule that is no longer valid is left out. Core
 * thread only.
 */
public final class StateStore {
  private static final Logger LOG = LoggerFactory.getLogger(StateStore.class);

  private final VirtualSwitch vs;
  private final Persistence persistence;
  private final ScheduledExecutorService exec;
  private final LongSupplier clock;
  private final SavedForm saved;
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
    this.exec = exec;
    this.clock = clock;
    this.saved = new SavedForm(f);
  }

  /** The state changed: journals the change now and saves the whole state within a second. */
  void changed() {
    journal();
    if (persistence == null || saveScheduled) {
      return;
    }
    saveScheduled = true;
    exec.schedule(this::saveNow, 1000, TimeUnit.MILLISECONDS);
  }

  /**
   * Appends what changed since the last journal write or save to the journal, in one write. Called
   * after every change and before every barrier reply (a rollback after a physical refusal changes
   * the state without a new plan).
   */
  public void journal() {
    VirtualSwitch.Changes c = vs.drainChanges();
    if (persistence == null || c.isEmpty()) {
      return;
    }
    StringBuilder sb = new StringBuilder();
    for (var e : c.rules().entrySet()) {
      VirtualRule now = vs.rule(e.getKey());
      sb.append(now != null ? Persistence.FLOW : Persistence.FLOW_GONE)
          .append(' ')
          .append(saved.flow(now != null ? now : e.getValue()))
          .append('\n');
    }
    for (int id : c.groups()) {
      VirtualGroup g = vs.group(id);
      if (g != null) {
        sb.append(Persistence.GROUP).append(' ').append(Persistence.hex(saved.group(g)));
      } else {
        sb.append(Persistence.GROUP_GONE).append(' ').append(Integer.toUnsignedString(id));
      }
      sb.append('\n');
    }
    if (c.ports()) {
      sb.append(Persistence.portsLine(new ArrayList<>(vs.ports().all())));
    }
    try {
      persistence.append(sb.toString());
    } catch (IOException e) {
      LOG.error("cannot journal to {}: {}", persistence.journalFile(), e.toString());
    }
  }

  public void saveNow() {
    saveScheduled = false;
    if (persistence == null) {
      vs.drainChanges();
      return;
    }
    try {
      persistence.saveHex(
          new ArrayList<>(vs.ports().all()),
          saved.flows(vs.rules()),
          saved.groups(vs.groups().values()));
      vs.drainChanges(); // the file holds them: the journal is empty again
    } catch (Exception e) {
      LOG.error("cannot save state to {}: {}", persistence.file(), e.toString());
      journal();
    }
  }

  /** Closes the journal (OneSwitch stops). */
  public void close() {
    if (persistence != null) {
      persistence.close();
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
