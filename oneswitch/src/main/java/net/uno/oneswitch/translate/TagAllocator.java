package net.uno.oneswitch.translate;

import java.util.HashMap;
import java.util.Map;
import java.util.OptionalInt;
import java.util.TreeMap;
import java.util.TreeSet;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;

/**
 * Ids keyed by a long (flow-id tags: {@link Translator#tagKey(int, int)}, the egress virtual port
 * and instance slot), with reference counts. An id is never shared by two live keys (no hashing, no
 * collisions); it is freed when its last reference goes.
 */
public final class TagAllocator {
  private final int min;
  private final int max;
  private final Map<Long, Integer> tagOf = new HashMap<>();
  private final Map<Long, Integer> refs = new HashMap<>();
  private final TreeSet<Integer> free = new TreeSet<>();
  private int next;
  private long generation;

  /** VLAN carrier: ids 1..4094. */
  public static TagAllocator vlan() {
    return new TagAllocator(1, 4094);
  }

  public TagAllocator(int min, int max) {
    this.min = min;
    this.max = max;
    this.next = min;
  }

  /** Takes a reference on the id of {@code key}, allocating one if needed. */
  public int acquire(long key) throws OfError {
    Integer t = tagOf.get(key);
    if (t == null) {
      if (!free.isEmpty()) {
        t = free.pollFirst();
      } else if (next <= max) {
        t = next++;
      } else {
        throw new OfError(
            OFFlowModFailedCode.TABLE_FULL, "flow-id tags exhausted (" + (max - min + 1) + ")");
      }
      tagOf.put(key, t);
      generation++;
    }
    refs.merge(key, 1, Integer::sum);
    return t;
  }

  /** Drops one reference; the id is freed when none is left. */
  public void release(long key) {
    Integer r = refs.get(key);
    if (r == null) {
      throw new IllegalStateException("release of unreferenced tag for key " + key);
    }
    if (r == 1) {
      refs.remove(key);
      free.add(tagOf.remove(key));
      generation++;
    } else {
      refs.put(key, r - 1);
    }
  }

  public OptionalInt tagOf(long key) {
    Integer t = tagOf.get(key);
    return t == null ? OptionalInt.empty() : OptionalInt.of(t);
  }

  public int refs(long key) {
    return refs.getOrDefault(key, 0);
  }

  /** Grows whenever a key gets an id or loses it: {@link #live} can differ only if this moved. */
  public long generation() {
    return generation;
  }

  /** Live ids: key -> id, ascending by key. */
  public Map<Long, Integer> live() {
    return new TreeMap<>(tagOf);
  }
}
