package net.uno.oneswitch.core;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFPort;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The port-change path run once at start on a scratch core (its own state; no switch, controller or
 * state file): rules added, a prepare, a remap with a drain window and its expiry, and one of each
 * physical message encoded. Otherwise the first real remap after a (re)start pays the JVM's
 * first-use costs on its critical path: ~120 classes loaded and linked during it (half of them
 * lambda forms), its translate+plan 10-150 ms on this 2-core machine against ~2 ms for the next one
 * (bench/RESULTS.md, remap-fast). Nothing of the real core changes.
 */
final class WarmUp {
  private static final Logger LOG = LoggerFactory.getLogger(WarmUp.class);

  private WarmUp() {}

  /**
   * Runs on the core thread of {@code exec}; the scratch core's later steps run there too. Returns
   * the scratch core (tests), null with fewer than two switches (the remap part is skipped).
   */
  static OneSwitchCore run(Topology topo, int physicalTables, ScheduledExecutorService exec) {
    PhysicalState.encodeOneOfEach();
    List<String> sws = topo.switches();
    if (sws.size() < 2) {
      return null;
    }
    String a = sws.get(0);
    String b = sws.get(1);
    int p = 0xfff0; // scratch physical ports, clear of the PCIe ports
    while (topo.isPciePort(a, p) || topo.isPciePort(b, p) || topo.isPciePort(a, p + 1)) {
      p--;
    }
    OneSwitchCore s =
        new OneSwitchCore(
            topo, physicalTables, exec, System::currentTimeMillis, new Metrics(), null);
    s.quiet = true;
    try {
      s.initPorts(
          List.of(
              new VPort(1, a, p, "warm1"),
              new VPort(2, b, p, "warm2"),
              new VPort(3, a, p + 1, "w3")));
      s.addRule(rule(1, 3), false); // in_port=1 -> 3 (local, then across PCIe after the remap)
      s.addRule(rule(3, 2), false); // in_port=3 -> 2 (across PCIe, then local)
      s.addRule(rule(2, 1), false);
      s.preparePort(3, b, p + 1, 1);
      s.remapPort(3, b, p + 1, 1); // its drain and the prepared window expire on their timers
    } catch (OfError | PortOpError | RuntimeException e) {
      LOG.debug("warm-up: {}", e.toString());
    }
    return s;
  }

  private static VirtualRule rule(int in, int out) {
    var f = OneSwitchCore.F;
    return new VirtualRule(
        0,
        10,
        f.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(in))
            .setExact(MatchField.ETH_TYPE, EthType.IPv4)
            .build(),
        List.of(f.instructions().applyActions(List.of(f.actions().output(OFPort.of(out), 0xffff)))),
        0,
        0,
        0,
        Set.of(),
        0);
  }
}
