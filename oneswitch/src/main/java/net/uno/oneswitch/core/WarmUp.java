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
 * first-use costs (loading and linking the classes and lambda forms of that path) on its critical
 * path, where a migration waits for it. Nothing of the real core changes.
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
    PortChanges pc = s.portChanges();
    pc.quiet = true;
    try {
      pc.initPorts(
          List.of(
              new VPort(1, a, p, "warm1"),
              new VPort(2, b, p, "warm2"),
              new VPort(3, a, p + 1, "w3")));
      s.flowMods().addRule(rule(1, 3), false); // in_port=1 -> 3 (local, then across PCIe)
      s.flowMods().addRule(rule(3, 2), false); // in_port=3 -> 2 (across PCIe, then local)
      s.flowMods().addRule(rule(2, 1), false);
      pc.preparePort(3, b, p + 1, 1);
      pc.remapPort(3, b, p + 1, 1); // its drain and the prepared window expire on their timers
    } catch (OfError | PortError | RuntimeException e) {
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
