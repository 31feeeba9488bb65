package net.uno.oneswitch.core;

import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes the state to disk ({@link Persistence}) off the core thread's way: the core hands over
 * what changed ({@link #append}) or a snapshot of the whole state ({@link #save}), each numbered in
 * order, and goes on; this writer's thread encodes them and writes every append queued meanwhile in
 * one {@code write} (group commit), a snapshot as state.json (which empties the journal). {@link
 * #written} tells the core when everything handed over so far is in the kernel, so an
 * acknowledgement (a BARRIER_REPLY, a REST answer) waits for the records it covers and nothing
 * else; records the writer has not taken yet when an acknowledgement needs them, the core writes
 * itself (no thread hand-off on that path; the snapshots, and the appends between acknowledgements,
 * stay off the core thread). Entries are immutable values, read without locks; the futures of
 * {@link #written} complete on the core executor.
 */
final class JournalWriter {
  private static final Logger LOG = LoggerFactory.getLogger(JournalWriter.class);

  /** What a journal line says an entry is now. */
  sealed interface Entry {}

  /** A rule as it is now, or removed ({@code gone}: the rule last seen under its key). */
  record Flow(VirtualRule rule, boolean gone) implements Entry {}

  /** A group as it is now. */
  record Group(VirtualGroup group) implements Entry {}

  /** A group removed. */
  record GroupGone(int id) implements Entry {}

  /** The port map now. */
  record Ports(List<VPort> ports) implements Entry {}

  /** The whole state, taken on the core thread. */
  record Snapshot(List<VPort> ports, List<VirtualRule> rules, List<VirtualGroup> groups) {}

  private sealed interface Task {
    long seq();
  }

  private record Append(long seq, List<Entry> entries) implements Task {}

  private record Save(long seq, Snapshot snapshot, CompletableFuture<Void> done) implements Task {}

  private record Waiter(long seq, CompletableFuture<Void> future) {}

  private final Persistence persistence;
  private final Executor core;
  private final SavedForm saved; // whoever is busy (below)
  private final Thread thread;

  private final Object lock = new Object();
  private final ArrayDeque<Task> queue = new ArrayDeque<>(); // under lock
  private boolean closing; // under lock
  private boolean busy; // under lock: a batch is being written (by this thread or the core's)

  private long handed; // core thread: the last sequence number handed over
  private final ArrayDeque<Waiter> waiters = new ArrayDeque<>(); // core thread, seq ascending
  private volatile long done; // everything up to this sequence number is written
  private final AtomicLong wanted = new AtomicLong(); // the highest sequence number waited for

  /** {@code core}: where the futures of {@link #written} complete (the core thread). */
  JournalWriter(Persistence persistence, OFFactory f, Executor core) {
    this.persistence = persistence;
    this.core = core;
    this.saved = new SavedForm(f);
    this.thread = new Thread(this::run, "oneswitch-journal");
    thread.setDaemon(true);
    thread.start();
  }

  /** Hands {@code entries} over for the journal (core thread). */
  void append(List<Entry> entries) {
    enqueue(new Append(++handed, entries));
  }

  /**
   * Hands a snapshot over to be written as state.json (core thread); it follows every append handed
   * over before it. The future completes (on the writer thread) once it is written, or
   * exceptionally if it could not be: the journal then keeps what it held.
   */
  CompletableFuture<Void> save(Snapshot s) {
    CompletableFuture<Void> f = new CompletableFuture<>();
    enqueue(new Save(++handed, s, f));
    return f;
  }

  /**
   * Completes (on the core thread) once everything handed over so far is written; at once if it is.
   * If the writer is idle and only journal records wait, the core thread writes them itself (one
   * write, usually microseconds) instead of waiting for the writer thread to be scheduled: an
   * acknowledgement then costs no thread hand-off. Core thread only.
   */
  CompletableFuture<Void> written() {
    long seq = handed;
    if (done < seq) {
      writeHere();
    }
    if (done >= seq) {
      return CompletableFuture.completedFuture(null);
    }
    CompletableFuture<Void> f = new CompletableFuture<>();
    waiters.add(new Waiter(seq, f));
    wanted.accumulateAndGet(seq, Math::max);
    if (done >= seq) { // the writer may have finished between the two reads
      release();
    }
    return f;
  }

  /** Writes what is queued, then stops the thread (OneSwitch stops). Any thread. */
  void close() {
    synchronized (lock) {
      closing = true;
      lock.notifyAll();
    }
    try {
      thread.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    persistence.close();
  }

  private void enqueue(Task t) {
    synchronized (lock) {
      if (closing) {
        throw new IllegalStateException("journal closed");
      }
      queue.add(t);
      lock.notifyAll();
    }
  }

  /**
   * Writes the journal records at the head of the queue on the calling (core) thread, unless the
   * writer is busy or a snapshot comes first (those stay the writer's).
   */
  private void writeHere() {
    List<Task> mine = new ArrayList<>();
    synchronized (lock) {
      if (busy) {
        return;
      }
      while (queue.peek() instanceof Append) {
        mine.add(queue.poll());
      }
      if (mine.isEmpty()) {
        return;
      }
      busy = true;
    }
    try {
      write(mine);
    } catch (RuntimeException e) {
      LOG.error("journal writer: {}", e.toString(), e);
    }
    done = mine.get(mine.size() - 1).seq(); // the writer was idle: everything before is written
    synchronized (lock) {
      busy = false;
      lock.notifyAll();
    }
    release(); // earlier acknowledgements waiting for the writer may be covered now
  }

  /** Completes the waiters whose records are written (core thread). */
  private void release() {
    long d = done;
    while (!waiters.isEmpty() && waiters.peek().seq() <= d) {
      waiters.poll().future().complete(null);
    }
  }

  private void run() {
    List<Task> batch = new ArrayList<>();
    while (true) {
      synchronized (lock) {
        while (busy || (queue.isEmpty() && !closing)) {
          try {
            lock.wait();
          } catch (InterruptedException e) {
            closing = true;
          }
        }
        if (queue.isEmpty()) {
          return;
        }
        batch.addAll(queue);
        queue.clear();
        busy = true;
      }
      try {
        write(batch);
      } catch (RuntimeException e) {
        // a bug, not the disk: logged; the thread lives on, or every acknowledgement would hang
        LOG.error("journal writer: {}", e.toString(), e);
      }
      long before = done;
      done = batch.get(batch.size() - 1).seq();
      batch.clear();
      synchronized (lock) {
        busy = false;
      }
      if (wanted.get() > before) { // someone may wait for what was just written
        try {
          core.execute(this::release);
        } catch (RejectedExecutionException e) {
          // the core has stopped: no one is left to answer
        }
      }
    }
  }

  /** Writes the appends of {@code batch} in one write each run between two snapshots. */
  private void write(List<Task> batch) {
    StringBuilder lines = new StringBuilder();
    for (Task t : batch) {
      if (t instanceof Append a) {
        for (Entry e : a.entries()) {
          line(lines, e);
        }
      } else if (t instanceof Save s) {
        flush(lines);
        try {
          persistence.saveHex(
              s.snapshot().ports(),
              saved.flows(s.snapshot().rules()),
              saved.groups(s.snapshot().groups()));
          s.done().complete(null);
        } catch (Exception e) {
          LOG.error("cannot save state to {}: {}", persistence.file(), e.toString());
          s.done().completeExceptionally(e);
        }
      }
    }
    flush(lines);
  }

  private void flush(StringBuilder lines) {
    if (lines.isEmpty()) {
      return;
    }
    try {
      persistence.append(lines.toString());
    } catch (IOException e) {
      LOG.error("cannot journal to {}: {}", persistence.journalFile(), e.toString());
    }
    lines.setLength(0);
  }

  private void line(StringBuilder sb, Entry e) {
    if (e instanceof Flow fl) {
      sb.append(fl.gone() ? Persistence.FLOW_GONE : Persistence.FLOW)
          .append(' ')
          .append(saved.flow(fl.rule()))
          .append('\n');
    } else if (e instanceof Group g) {
      sb.append(Persistence.GROUP).append(' ').append(Persistence.hex(saved.group(g.group())));
      sb.append('\n');
    } else if (e instanceof GroupGone g) {
      sb.append(Persistence.GROUP_GONE).append(' ').append(Integer.toUnsignedString(g.id()));
      sb.append('\n');
    } else if (e instanceof Ports p) {
      sb.append(Persistence.portsLine(p.ports()));
    }
  }
}
