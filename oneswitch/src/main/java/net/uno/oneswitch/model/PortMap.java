package net.uno.oneswitch.model;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * Immutable map of virtual ports to physical (switch, port), plus the draining (ingress-only) ports
 * of each vport. A drain whose vport is not mapped, or whose physical port is an instance of any
 * vport, is dropped: mapping a port ends its drain.
 */
public final class PortMap {
  private final TreeMap<Integer, VPort> byVport;
  private final List<Drain> drains;

  public PortMap(Collection<VPort> ports) {
    this(ports, List.of());
  }

  public PortMap(Collection<VPort> ports, Collection<Drain> drains) {
    TreeMap<Integer, VPort> m = new TreeMap<>(Integer::compareUnsigned);
    for (VPort p : ports) {
      m.put(p.vport(), p);
    }
    this.byVport = m;
    List<Drain> d = new ArrayList<>();
    Set<VPort.Loc> seen = new HashSet<>();
    for (Drain x : drains) {
      if (m.containsKey(x.vport())
          && m.values().stream().noneMatch(p -> p.has(x.loc().sw(), x.loc().port()))
          && seen.add(x.loc())) {
        d.add(x);
      }
    }
    this.drains = List.copyOf(d);
  }

  public static PortMap empty() {
    return new PortMap(List.of());
  }

  public Optional<VPort> get(int vport) {
    return Optional.ofNullable(byVport.get(vport));
  }

  /** The virtual port behind physical (sw, port) (any of its instances), if any. */
  public Optional<VPort> byPhysical(String sw, int port) {
    return byVport.values().stream().filter(p -> p.has(sw, port)).findFirst();
  }

  /**
   * The virtual port a frame from physical (sw, port) comes in by: an instance's vport, or the
   * vport the port is draining from.
   */
  public Optional<VPort> byIngress(String sw, int port) {
    Optional<VPort> v = byPhysical(sw, port);
    if (v.isPresent()) {
      return v;
    }
    return drains.stream()
        .filter(d -> d.loc().sw().equals(sw) && d.loc().port() == port)
        .findFirst()
        .map(d -> byVport.get(d.vport()));
  }

  /** Every draining port, in the order added. */
  public List<Drain> drains() {
    return drains;
  }

  /** The draining ports of {@code vport}. */
  public List<Drain> drainsOf(int vport) {
    return drains.stream().filter(d -> d.vport() == vport).toList();
  }

  /** This map with {@code extra} drains added (a drain of the same port is replaced). */
  public PortMap withDrains(Collection<Drain> extra) {
    List<Drain> d = new ArrayList<>(extra);
    Set<VPort.Loc> locs = new HashSet<>();
    extra.forEach(x -> locs.add(x.loc()));
    drains.stream().filter(x -> !locs.contains(x.loc())).forEach(d::add);
    return new PortMap(byVport.values(), d);
  }

  /** This map without the drains that end at or before {@code nowMs}. */
  public PortMap withoutDrainsUntil(long nowMs) {
    return new PortMap(byVport.values(), drains.stream().filter(x -> x.untilMs() > nowMs).toList());
  }

  /** This map without the (leaving, not prepared) drains of physical port {@code loc}. */
  public PortMap withoutLeavingDrainsAt(VPort.Loc loc) {
    return new PortMap(
        byVport.values(),
        drains.stream().filter(x -> x.prepared() || !x.loc().equals(loc)).toList());
  }

  /** All mapped ports, ascending by vport. */
  public Collection<VPort> all() {
    return Collections.unmodifiableCollection(byVport.values());
  }

  public boolean hasPortsOn(String sw) {
    return byVport.values().stream().anyMatch(p -> p.on(sw))
        || drains.stream().anyMatch(d -> d.loc().sw().equals(sw));
  }

  public PortMap with(VPort p) {
    TreeMap<Integer, VPort> m = new TreeMap<>(byVport);
    m.put(p.vport(), p);
    return new PortMap(m.values(), drains);
  }

  public PortMap without(int vport) {
    TreeMap<Integer, VPort> m = new TreeMap<>(byVport);
    m.remove(vport);
    return new PortMap(m.values(), drains);
  }

  public Map<Integer, VPort> asMap() {
    return Collections.unmodifiableMap(byVport);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PortMap pm && pm.byVport.equals(byVport) && pm.drains.equals(drains);
  }

  @Override
  public int hashCode() {
    return byVport.hashCode() * 31 + drains.hashCode();
  }
}
