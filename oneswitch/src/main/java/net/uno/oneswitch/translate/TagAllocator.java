package net.uno.oneswitch.translate;

import java.util.HashMap;
import java.util.Map;
import java.util.OptionalInt;
import java.util.TreeMap;
import java.util.TreeSet;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;

/**
 * Flow-id tags keyed by the egress virtual port, with reference counts. An id is never shared by
 * two live keys (no hashing, no collisions); it is freed when its last reference goes.
 */
public final class TagAllocator {
  private final int min;
  private final int max;
  private final Map<Integer, Integer> tagOf = new HashMap<>();
  private final Map<Integer, Integer> refs = new HashMap<>();
  private final TreeSet<Integer> free = new TreeSet<>();
  private int next;

  /** VLAN carrier: ids 1..4094. */
  public static TagAllocator vlan() {
    return new TagAllocator(1, 4094);
  }

  public TagAllocator(int min, int max) {
    this.min = min;
    this.max = max;
    this.next = min;
  }

  /** Takes a reference on the tag of {@code vport}, allocating one if needed. */
  public int acquire(int vport) throws OfError {
    Integer t = tagOf.get(vport);
    if (t == null) {
      if (!free.isEmpty()) {
        t = free.pollFirst();
      } else if (next <= max) {
        t = next++;
      } else {
        throw new OfError(
            OFFlowModFailedCode.TABLE_FULL, "flow-id tags exhausted (" + (max - min + 1) + ")");
      }
      tagOf.put(vport, t);
    }
    refs.merge(vport, 1, Integer::sum);
    return t;
  }

  /** Drops one reference; the id is freed when none is left. */
  public void release(int vport) {
    Integer r = refs.get(vport);
    if (r == null) {
      throw new IllegalStateException("release of unreferenced tag for vport " + vport);
    }
    if (r == 1) {
      refs.remove(vport);
      free.add(tagOf.remove(vport));
    } else {
      refs.put(vport, r - 1);
    }
  }

  public OptionalInt tagOf(int vport) {
    Integer t = tagOf.get(vport);
    return t == null ? OptionalInt.empty() : OptionalInt.of(t);
  }

  public int refs(int vport) {
    return refs.getOrDefault(vport, 0);
  }

  /** Live tags: vport -> tag, ascending by vport. */
  public Map<Integer, Integer> live() {
    return new TreeMap<>(tagOf);
  }
}
