package net.uno.oneswitch.translate;

import java.util.Map;
import java.util.OptionalInt;
import java.util.TreeMap;

/**
 * The flow-id allocators of both carriers behind one key space: VLAN ids 1..4094 for {@link
 * Translator#tagKey} keys, MPLS labels 16..1048575 for {@link Carrier#mplsKey} keys; each
 * refcounted like {@link TagAllocator}.
 */
public final class CarrierTags {
  private final TagAllocator vlan;
  private final TagAllocator mpls;

  public CarrierTags() {
    this(TagAllocator.vlan(), new TagAllocator(Carrier.MIN_LABEL, Carrier.MAX_LABEL));
  }

  /** With given allocators (tests: small ranges to reach exhaustion). */
  public CarrierTags(TagAllocator vlan, TagAllocator mpls) {
    this.vlan = vlan;
    this.mpls = mpls;
  }

  private TagAllocator of(long key) {
    return Carrier.isMpls(key) ? mpls : vlan;
  }

  /** Takes a reference on the id of {@code key}; TABLE_FULL if its carrier's ids are exhausted. */
  public int acquire(long key) throws OfError {
    return of(key).acquire(key);
  }

  public void release(long key) {
    of(key).release(key);
  }

  public OptionalInt tagOf(long key) {
    return of(key).tagOf(key);
  }

  public int refs(long key) {
    return of(key).refs(key);
  }

  /** Grows whenever {@link #live} may have changed (see {@link TagAllocator#generation}). */
  public long generation() {
    return vlan.generation() + mpls.generation();
  }

  /** Live ids of both carriers: key -> id. */
  public Map<Long, Integer> live() {
    Map<Long, Integer> out = new TreeMap<>(vlan.live());
    out.putAll(mpls.live());
    return out;
  }
}
