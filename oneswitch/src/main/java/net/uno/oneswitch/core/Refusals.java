package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import net.uno.oneswitch.translate.OfError;

/**
 * Which controller message each physical message came from, until a barrier shows the switch
 * accepted it, so that a switch's refusal can be answered and undone: the controller gets an
 * OFPT_ERROR for ITS message and the virtual change is rolled back (fail closed). Core thread only.
 */
final class Refusals {
  /**
   * What to undo if a physical switch refuses a part of one controller message: the steps restore
   * the virtual state before that message (each only if nothing newer replaced what it undoes).
   */
  static final class Undo {
    private final Origin origin;
    private final List<Runnable> steps = new ArrayList<>();
    private boolean failed;

    private Undo(Origin origin) {
      this.origin = origin;
    }

    /** The controller message to answer. */
    Origin origin() {
      return origin;
    }

    /** Runs the undo steps, last first. */
    void rollBack() {
      for (int i = steps.size() - 1; i >= 0; i--) {
        steps.get(i).run();
      }
    }
  }

  /** The controller message being applied right now, or null. */
  private Undo current;

  /** Per switch: physical xid sent for a controller message -> its undo, until a barrier. */
  private final Map<String, TreeMap<Long, Undo>> inflight = new HashMap<>();

  /** The physical messages sent until {@link #end()} come from {@code origin}'s message. */
  void begin(Origin origin) {
    current = new Undo(origin);
  }

  /** The controller message is applied (its physical messages may still be refused). */
  void end() {
    current = null;
  }

  /** Applies a controller message; throws the OpenFlow error to answer with. */
  interface Apply {
    void run() throws OfError;
  }

  /**
   * Runs {@code apply}, the applying of {@code origin}'s message, between {@link #begin} and {@link
   * #end}: a switch's refusal of a physical message it sends answers {@code origin} and rolls back
   * what {@code apply} changed.
   */
  void applying(Origin origin, Apply apply) throws OfError {
    begin(origin);
    try {
      apply.run();
    } finally {
      end();
    }
  }

  /**
   * Undoes what the message being applied changed so far (its steps, last first) and forgets the
   * steps: a bundle's trial run, or a bundle message refused before anything was sent.
   */
  void rollBackCurrent() {
    if (current == null) {
      return;
    }
    List<Runnable> steps = new ArrayList<>(current.steps);
    current.steps.clear();
    for (int i = steps.size() - 1; i >= 0; i--) {
      steps.get(i).run();
    }
    current.steps.clear(); // steps the undo itself registered
  }

  /** A step undoing part of the message being applied (no-op outside one). */
  void onUndo(Runnable step) {
    if (current != null) {
      current.steps.add(step);
    }
  }

  /** Physical message {@code xid} went to switch {@code sw}. */
  void sent(String sw, long xid) {
    if (current != null) {
      inflight.computeIfAbsent(sw, k -> new TreeMap<>()).put(xid, current);
    }
  }

  /**
   * Switch {@code sw} answered a barrier sent after every message with an xid below {@code mark}.
   */
  void accepted(String sw, long mark) {
    TreeMap<Long, Undo> m = inflight.get(sw);
    if (m != null) {
      m.headMap(mark).clear();
    }
  }

  /**
   * Switch {@code sw} went down: the messages sent to it will never be answered (nor refused), and
   * what it holds is reconciled when it returns.
   */
  void forget(String sw) {
    inflight.remove(sw);
  }

  /** Whether any physical message still waits for a barrier. */
  boolean pending() {
    return inflight.values().stream().anyMatch(m -> !m.isEmpty());
  }

  /**
   * Switch {@code sw} refused physical message {@code xid}: the undo of the controller message it
   * came from, the first time one of its messages is refused; null if none (not a controller's, or
   * already rolled back).
   */
  Undo refused(String sw, long xid) {
    TreeMap<Long, Undo> m = inflight.get(sw);
    Undo u = m == null ? null : m.remove(xid);
    if (u == null || u.failed) {
      return null;
    }
    u.failed = true;
    return u;
  }
}
