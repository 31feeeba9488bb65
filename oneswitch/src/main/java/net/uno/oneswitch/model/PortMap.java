package net.uno.oneswitch.model;

import java.util.Collection;
import java.util.Collections;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/** Immutable map of virtual ports to physical (switch, port). */
public final class PortMap {
  private final TreeMap<Integer, VPort> byVport;

  public PortMap(Collection<VPort> ports) {
    TreeMap<Integer, VPort> m = new TreeMap<>(Integer::compareUnsigned);
    for (VPort p : ports) {
      m.put(p.vport(), p);
    }
    this.byVport = m;
  }

  public static PortMap empty() {
    return new PortMap(java.util.List.of());
  }

  public Optional<VPort> get(int vport) {
    return Optional.ofNullable(byVport.get(vport));
  }

  /** The virtual port behind physical (sw, port) (any of its instances), if any. */
  public Optional<VPort> byPhysical(String sw, int port) {
    return byVport.values().stream().filter(p -> p.has(sw, port)).findFirst();
  }

  /** All mapped ports, ascending by vport. */
  public Collection<VPort> all() {
    return Collections.unmodifiableCollection(byVport.values());
  }

  public boolean hasPortsOn(String sw) {
    return byVport.values().stream().anyMatch(p -> p.on(sw));
  }

  public PortMap with(VPort p) {
    TreeMap<Integer, VPort> m = new TreeMap<>(byVport);
    m.put(p.vport(), p);
    return new PortMap(m.values());
  }

  public PortMap without(int vport) {
    TreeMap<Integer, VPort> m = new TreeMap<>(byVport);
    m.remove(vport);
    return new PortMap(m.values());
  }

  public Map<Integer, VPort> asMap() {
    return Collections.unmodifiableMap(byVport);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PortMap pm && pm.byVport.equals(byVport);
  }

  @Override
  public int hashCode() {
    return byVport.hashCode();
  }
}
