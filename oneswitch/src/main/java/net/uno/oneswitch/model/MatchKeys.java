package net.uno.oneswitch.model;

import java.util.LinkedHashMap;
import java.util.Map;
import net.uno.oneswitch.translate.MatchUtil;
import org.projectfloodlight.openflow.protocol.match.Match;

/**
 * {@link MatchUtil#key} remembered per match (bounded). Rule identities are looked up far more
 * often than new matches appear (every remap re-derives the keys of every translated and dispatch
 * rule), and building the text key costs much more than a match's hash and equals, most of all in
 * code the JIT has not compiled yet (a remap's first runs).
 *
 * <p>Two levels. First by identity, in a small direct-mapped table: a rule's key is asked for
 * several times per flow-mod on the same match object (the rule keeps it), and an identity lookup
 * hashes nothing; the table is bounded (a slot is overwritten on collision), so it keeps only the
 * last few thousand matches alive. Then by value (a new object equal to a known match, e.g. the
 * next decoded flow-mod's), under a mixed hash: a match's own hash (openflowj's, a sum over its
 * fields) spreads poorly over the low bits HashMap indexes by (similar matches collide in a few
 * buckets), which would make lookups tree-bin searches calling {@code equals}.
 */
public final class MatchKeys {
  static final int MAX = 1 << 16;

  /** Slots of the identity table (a power of two). */
  static final int RECENT = 1 << 13;

  private static final Object LOCK = new Object();

  private static final Match[] recentMatch = new Match[RECENT];

  private static final String[] recentKey = new String[RECENT];

  private static final Map<ByValue, String> BY_VALUE =
      new LinkedHashMap<>(1024, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<ByValue, String> e) {
          return size() > MAX;
        }
      };

  private record ByValue(Match match, int hash) {
    ByValue(Match match) {
      this(match, mix(match.hashCode()));
    }

    private static int mix(int h) {
      h ^= h >>> 16;
      h *= 0x85ebca6b;
      h ^= h >>> 13;
      h *= 0xc2b2ae35;
      return h ^ (h >>> 16);
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof ByValue b && b.hash == hash && b.match.equals(match);
    }
  }

  private MatchKeys() {}

  /** The canonical key of {@code m} (as {@link MatchUtil#key}). */
  public static String of(Match m) {
    int slot = System.identityHashCode(m) & (RECENT - 1);
    synchronized (LOCK) {
      if (recentMatch[slot] == m) {
        return recentKey[slot];
      }
      ByValue v = new ByValue(m);
      String k = BY_VALUE.get(v);
      if (k == null) {
        k = MatchUtil.key(m);
        BY_VALUE.put(v, k);
      }
      recentMatch[slot] = m;
      recentKey[slot] = k;
      return k;
    }
  }
}
