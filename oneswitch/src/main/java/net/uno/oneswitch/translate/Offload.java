package net.uno.oneswitch.translate;

import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.projectfloodlight.openflow.types.OFPort;

/**
 * Where each virtual table runs (README "Table offload"): everywhere (the default: every switch
 * with ports runs it, as without offload) or on one switch only. A packet on switch S that reaches
 * a table located on L != S is handed off to L with a carrier tag naming (virtual in_port, table);
 * L's dispatch pops it, writes the in_port's code into {@code tunnel_id} and continues at that
 * table. Immutable, pure.
 *
 * <p>Handoff tag keys: the virtual in_port in bits 0..31, the table in bits 32..39 and {@link
 * #HANDOFF_BIT}, beside the carrier's own bits (MPLS, rewrite) as for egress tags.
 */
public record Offload(Map<Integer, String> locations, Map<Integer, Integer> hostMin) {
  /** Whether a table's rules use metadata written before it (computed from the virtual rules). */
  public interface MetaFacts {
    /** True if a rule in a table at or after {@code t} matches metadata. */
    boolean matchedFrom(int t);

    /** True if a rule in a table before {@code t} writes metadata. */
    boolean writtenBefore(int t);
  }

  /** The location of a table that runs on every switch with ports (no offload). */
  public static final String EVERYWHERE = "everywhere";

  /** No table located anywhere: the translation without offload. */
  public static final Offload NONE = new Offload(Map.of());

  /** Flag bit of a handoff tag key. */
  static final long HANDOFF_BIT = 1L << 61;

  /**
   * {@code hostMin}: the split tables (README "Table offload", "Split"): table t located on an sNIC
   * L with {@code hostMin.get(t) = P} keeps its rules of priority at least P on the host too, for
   * the host's own packets, which the host hands off to L (the whole table) only when they miss
   * them. Every key of it is located.
   */
  public Offload {
    locations = Map.copyOf(new TreeMap<>(locations));
    hostMin = Map.copyOf(new TreeMap<>(hostMin));
    for (int t : hostMin.keySet()) {
      if (!locations.containsKey(t)) {
        throw new IllegalArgumentException("split table " + t + " is not located");
      }
    }
  }

  /** No table split. */
  public Offload(Map<Integer, String> locations) {
    this(locations, Map.of());
  }

  /** The lowest priority of table {@code t}'s rules that the host keeps too; empty if unsplit. */
  public Optional<Integer> hostMin(int t) {
    return Optional.ofNullable(hostMin.get(t));
  }

  /**
   * True if rule priority {@code priority} of table {@code t} runs on switch {@code host} (the
   * host) as the high part of a split table.
   */
  public boolean hostPart(int t, int priority) {
    Integer p = hostMin.get(t);
    return p != null && priority >= p;
  }

  /** The switch table {@code t} is located on; empty if it runs everywhere. */
  public Optional<String> at(int t) {
    return Optional.ofNullable(locations.get(t));
  }

  /** The location of table {@code t} as the REST API shows it. */
  public String location(int t) {
    return locations.getOrDefault(t, EVERYWHERE);
  }

  /** True if any table is located on one switch. */
  public boolean any() {
    return !locations.isEmpty();
  }

  /** True if table {@code t}'s rules are on switch {@code sw} (everywhere, or located there). */
  public boolean runsOn(int t, String sw) {
    String l = locations.get(t);
    return l == null || l.equals(sw);
  }

  /**
   * The lowest table located on {@code sw}: from there on {@code sw} runs packets handed off by
   * other switches; {@link Integer#MAX_VALUE} if none.
   */
  public int receivesAt(String sw) {
    int min = Integer.MAX_VALUE;
    for (Map.Entry<Integer, String> e : locations.entrySet()) {
      if (e.getValue().equals(sw)) {
        min = Math.min(min, e.getKey());
      }
    }
    return min;
  }

  /**
   * True if a packet that came in on {@code sw} may leave it by a handoff and come back by another
   * one (a table located elsewhere before a table located on {@code sw}).
   */
  public boolean bounces(String sw) {
    int back = receivesAt(sw);
    for (Map.Entry<Integer, String> e : locations.entrySet()) {
      if (e.getKey() < back && !e.getValue().equals(sw)) {
        return true;
      }
    }
    return false;
  }

  /** This placement with table {@code t} at {@code loc} ({@link #EVERYWHERE} removes it). */
  public Offload with(int t, String loc) {
    return with(t, loc, null);
  }

  /**
   * This placement with table {@code t} at {@code loc}, split with {@code hostMin} (null: not
   * split).
   */
  public Offload with(int t, String loc, Integer hostMin) {
    Map<Integer, String> m = new TreeMap<>(locations);
    Map<Integer, Integer> h = new TreeMap<>(this.hostMin);
    h.remove(t);
    if (loc.equals(EVERYWHERE)) {
      m.remove(t);
    } else {
      m.put(t, loc);
      if (hostMin != null) {
        h.put(t, hostMin);
      }
    }
    return new Offload(m, h);
  }

  /** The tag key of a handoff of a packet from virtual in_port {@code vin} at table {@code t}. */
  public static long handoffKey(int vin, int t) {
    return Integer.toUnsignedLong(vin) | ((long) (t & 0xff) << 32) | HANDOFF_BIT;
  }

  public static boolean isHandoff(long key) {
    return (key & HANDOFF_BIT) != 0;
  }

  /** The virtual in_port of a handoff key. */
  public static int handoffVport(long key) {
    return (int) key;
  }

  /** The virtual table of a handoff key. */
  public static int handoffTable(long key) {
    return (int) ((key >>> 32) & 0xff);
  }

  /**
   * The {@code tunnel_id} that names virtual in_port {@code vin} on the switch a packet was handed
   * to (never 0: local traffic has tunnel_id 0). CONTROLLER (a packet-out's pipeline) has its own.
   */
  public static long code(int vin) {
    return Integer.toUnsignedLong(vin);
  }

  /** The virtual in_port of a {@code tunnel_id} {@link #code}; empty for 0. */
  public static Optional<OFPort> vportOfCode(long code) {
    if (code == 0 || code > 0xffffffffL) {
      return Optional.empty();
    }
    return Optional.of(OFPort.of((int) code));
  }
}
