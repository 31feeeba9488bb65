package net.uno.oneswitch.model;

import java.util.LinkedHashMap;
import java.util.Map;
import net.uno.oneswitch.translate.MatchUtil;
import org.projectfloodlight.openflow.protocol.match.Match;

/**
 * {@link MatchUtil#key} remembered per match (bounded, least recently used out). Rule identities
 * are looked up far more often than new matches appear (every remap re-derives the keys of every
 * translated and dispatch rule), and the text key costs ~10x a match's hash + equals; ~65 us per
 * key in code the JIT has not compiled yet (a remap's first runs), which was most of a remap's CPU.
 */
public final class MatchKeys {
  static final int MAX = 1 << 16;

  private static final Map<Match, String> KEYS =
      new LinkedHashMap<>(1024, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Match, String> e) {
          return size() > MAX;
        }
      };

  private MatchKeys() {}

  /** The canonical key of {@code m} (as {@link MatchUtil#key}). */
  public static String of(Match m) {
    synchronized (KEYS) {
      String k = KEYS.get(m);
      if (k == null) {
        k = MatchUtil.key(m);
        KEYS.put(m, k);
      }
      return k;
    }
  }
}
