package net.uno.oneswitch.model;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The physical switches: one host switch and sNIC switches, each joined to the host switch by a
 * PCIe link (a port pair). Traffic between two sNICs crosses the host switch.
 */
public final class Topology {
  /** PCIe link of one sNIC. */
  public record Pcie(String snic, int hostPort, int snicPort) {}

  private final String host;
  private final List<String> switches;
  private final Map<String, Pcie> pcie;
  private final Set<String> shared;
  private final Map<String, Integer> maxRules;

  public Topology(String host, List<String> switches, List<Pcie> links) {
    this(host, switches, links, Set.of());
  }

  /**
   * {@code shared}: the switches that belong to an operator (config {@code shared}): OneSwitch
   * changes only what it owns there.
   */
  public Topology(String host, List<String> switches, List<Pcie> links, Set<String> shared) {
    this(host, switches, links, shared, Map.of());
  }

  /**
   * {@code maxRules}: the most physical rules a switch may hold for a table offload (config {@code
   * max_rules}), per switch that has a limit.
   */
  public Topology(
      String host,
      List<String> switches,
      List<Pcie> links,
      Set<String> shared,
      Map<String, Integer> maxRules) {
    this.maxRules = Map.copyOf(maxRules);
    this.host = host;
    this.switches = List.copyOf(switches);
    Map<String, Pcie> m = new LinkedHashMap<>();
    links.forEach(l -> m.put(l.snic(), l));
    this.pcie = m;
    this.shared = Set.copyOf(shared);
  }

  /** The rule limit of switch {@code sw} (config {@code max_rules}), or null if none. */
  public Integer maxRules(String sw) {
    return maxRules.get(sw);
  }

  /** True if switch {@code sw} is an operator's (config {@code shared}). */
  public boolean isShared(String sw) {
    return shared.contains(sw);
  }

  /** The ports of switch {@code sw} that are ends of PCIe links. */
  public List<Integer> pciePorts(String sw) {
    List<Integer> out = new ArrayList<>();
    for (Pcie p : pcie.values()) {
      if (sw.equals(host)) {
        out.add(p.hostPort());
      } else if (sw.equals(p.snic())) {
        out.add(p.snicPort());
      }
    }
    return out;
  }

  public String host() {
    return host;
  }

  public List<String> switches() {
    return switches;
  }

  public Map<String, Pcie> pcie() {
    return pcie;
  }

  /** The port on {@code from} through which a packet for a port on {@code to} leaves. */
  public int nextHopPort(String from, String to) {
    if (from.equals(to)) {
      throw new IllegalArgumentException("same switch");
    }
    if (from.equals(host)) {
      return pcie.get(to).hostPort();
    }
    return pcie.get(from).snicPort();
  }

  /** True if (sw, port) is an end of a PCIe link. */
  public boolean isPciePort(String sw, int port) {
    for (Pcie p : pcie.values()) {
      if ((sw.equals(host) && p.hostPort() == port)
          || (sw.equals(p.snic()) && p.snicPort() == port)) {
        return true;
      }
    }
    return false;
  }
}
