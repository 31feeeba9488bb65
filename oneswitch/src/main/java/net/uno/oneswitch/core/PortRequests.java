package net.uno.oneswitch.core;

import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.translate.Translator;
import org.projectfloodlight.openflow.types.OFPort;

/**
 * Checks of port-map requests (REST: map, remap, prepare, set-instances) against the topology and
 * the current port map. Pure: each throws a {@link PortError} naming the field, or returns.
 */
final class PortRequests {
  /** Longest drain or prepare window a request may ask for. */
  static final long MAX_WINDOW_MS = 60_000;

  private PortRequests() {}

  /** A drain window: 0 (none) .. {@link #MAX_WINDOW_MS}. */
  static void checkDrainMs(long drainMs) throws PortError {
    if (drainMs < 0 || drainMs > MAX_WINDOW_MS) {
      throw PortError.invalid("drain_ms", "must be 0.." + MAX_WINDOW_MS);
    }
  }

  /** A prepare window: 1 .. {@link #MAX_WINDOW_MS}. */
  static void checkPrepareMs(long ms) throws PortError {
    if (ms < 1 || ms > MAX_WINDOW_MS) {
      throw PortError.invalid("ms", "must be 1.." + MAX_WINDOW_MS);
    }
  }

  /**
   * Physical port (sw, port) may serve {@code vport}: both numbers valid, the switch known, not a
   * PCIe link port, and not mapped to another vport.
   */
  static void checkPhysical(Topology topo, PortMap ports, int vport, String sw, int port)
      throws PortError {
    if (vport == 0 || Integer.compareUnsigned(vport, OFPort.MAX.getPortNumber()) > 0) {
      throw PortError.invalid("vport", "vport must be 1..4294967040");
    }
    if (!topo.switches().contains(sw)) {
      throw PortError.invalid("switch", "unknown switch " + sw);
    }
    if (port == 0 || Integer.compareUnsigned(port, OFPort.MAX.getPortNumber()) > 0) {
      throw PortError.invalid("port", "port must be 1..4294967040");
    }
    if (topo.isPciePort(sw, port)) {
      throw PortError.invalid("port", "port " + port + " is a PCIe link port");
    }
    Optional<VPort> other = ports.byPhysical(sw, port);
    if (other.isPresent() && other.get().vport() != vport) {
      throw PortError.conflict(
          "port", "physical port already mapped to vport " + other.get().vport());
    }
  }

  /** {@code weights} (null: all equal) has one weight 1..65535 per instance, else 400 weights. */
  static void checkWeights(List<Integer> weights, int k) throws PortError {
    if (weights == null) {
      return;
    }
    if (weights.size() != k) {
      throw PortError.invalid("weights", "must list one weight per instance (" + k + ")");
    }
    for (Integer w : weights) {
      if (w == null || w < 1 || w > VPort.MAX_WEIGHT) {
        throw PortError.invalid("weights", "each weight must be an integer 1.." + VPort.MAX_WEIGHT);
      }
    }
  }

  /**
   * The instances of a set-instances request: 1..{@link Translator#MAX_INSTANCES}, distinct, each
   * checked like a remap target; a field error names {@code instances[i].switch|port}.
   */
  static void checkInstances(Topology topo, PortMap ports, int vport, List<VPort.Loc> instances)
      throws PortError {
    if (instances.isEmpty() || instances.size() > Translator.MAX_INSTANCES) {
      throw PortError.invalid(
          "instances", "must list 1.." + Translator.MAX_INSTANCES + " instances");
    }
    Set<VPort.Loc> seen = new HashSet<>();
    for (int i = 0; i < instances.size(); i++) {
      VPort.Loc l = instances.get(i);
      String f = "instances[" + i + "]";
      if (!seen.add(l)) {
        throw PortError.invalid(f, "duplicate instance " + l.sw() + ":" + l.port());
      }
      try {
        checkPhysical(topo, ports, vport, l.sw(), l.port());
      } catch (PortError e) {
        throw e.under(f);
      }
    }
  }
}
