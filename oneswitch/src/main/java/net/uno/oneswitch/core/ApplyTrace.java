package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Where a port change's time goes: translating and planning (until the first message is sent), then
 * per barriered phase the physical messages sent to each switch and each switch's barrier round
 * trip. Filled on the core thread (plan, messages, phase ends) and on the switches' event loop
 * (barrier answers), hence synchronized. Phases that sent nothing are not listed.
 */
public final class ApplyTrace {
  /** One phase: messages per switch, barrier round trip per switch (ms), its wall time (ms). */
  public record Phase(
      String name, Map<String, Integer> messages, Map<String, Double> barrierMs, double ms) {}

  private final long t0 = System.nanoTime();
  private double planMs = -1;
  private final List<Phase> phases = new ArrayList<>();
  private String name;
  private long start;
  private Map<String, Integer> messages = new TreeMap<>();
  private Map<String, Double> barriers = new TreeMap<>();

  /** The change is translated and planned: its first message goes out now. */
  public synchronized void planned() {
    if (planMs < 0) {
      planMs = ms(System.nanoTime() - t0);
    }
  }

  /** Starts phase {@code name} now. */
  public synchronized void begin(String name) {
    this.name = name;
    start = System.nanoTime();
    messages = new TreeMap<>();
    barriers = new TreeMap<>();
  }

  /** One message of the current phase went to {@code sw}. */
  public synchronized void message(String sw) {
    messages.merge(sw, 1, Integer::sum);
  }

  /** Switch {@code sw} answered the phase's barrier, sent at {@code sentNanos}. */
  public synchronized void barrier(String sw, long sentNanos) {
    barriers.put(sw, ms(System.nanoTime() - sentNanos));
  }

  /** Ends the current phase. */
  public synchronized void end() {
    if (name != null) {
      phases.add(new Phase(name, messages, barriers, ms(System.nanoTime() - start)));
      name = null;
    }
  }

  /** Milliseconds from the start of the change to its first message (translation and plan). */
  public synchronized double planMs() {
    return Math.max(planMs, 0);
  }

  public synchronized List<Phase> phases() {
    return List.copyOf(phases);
  }

  /** The phases as JSON-ready maps (REST answers). */
  public synchronized List<Map<String, Object>> phaseMaps() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Phase p : phases) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("phase", p.name());
      m.put("ms", p.ms());
      m.put("messages", p.messages());
      m.put("barrier_ms", p.barrierMs());
      out.add(m);
    }
    return out;
  }

  @Override
  public synchronized String toString() {
    StringBuilder b = new StringBuilder("plan ").append(planMs()).append(" ms");
    for (Phase p : phases) {
      b.append("; ")
          .append(p.name())
          .append(' ')
          .append(p.ms())
          .append(" ms, messages ")
          .append(p.messages())
          .append(", barriers (ms) ")
          .append(p.barrierMs());
    }
    return b.toString();
  }

  private static double ms(long nanos) {
    return Math.round(nanos / 1e4) / 100.0;
  }
}
