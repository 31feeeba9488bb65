package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import net.uno.oneswitch.model.VirtualRule;

/**
 * Idle timeouts of virtual rules, judged from polled counters: a rule is idle since the last poll
 * that saw its packet count change (or since it was installed, before any). Time is passed in.
 */
final class IdleTimeouts {
  /** Per rule: {packet count at the last poll (-1: none yet), ms when it last changed}. */
  private final Map<VirtualRule.Key, long[]> seen = new HashMap<>();

  /**
   * The rules of {@code rules} with an idle timeout that have seen no packet for it by {@code
   * nowMs}; {@code counters} gives a rule's {packets, bytes} now.
   */
  List<VirtualRule> expired(
      Collection<VirtualRule> rules, Function<VirtualRule, long[]> counters, long nowMs) {
    List<VirtualRule> out = new ArrayList<>();
    for (VirtualRule r : rules) {
      if (r.idleTimeout() <= 0) {
        continue;
      }
      long[] c = counters.apply(r);
      long[] st = seen.computeIfAbsent(r.key(), k -> new long[] {-1, r.installedMillis()});
      if (c[0] != st[0]) {
        if (st[0] != -1) {
          st[1] = nowMs;
        }
        st[0] = c[0];
      }
      if (nowMs - st[1] >= r.idleTimeout() * 1000L) {
        out.add(r);
      }
    }
    return out;
  }

  /** Forgets {@code key} (removed or replaced: a new rule starts idle from its install). */
  void forget(VirtualRule.Key key) {
    seen.remove(key);
  }
}
