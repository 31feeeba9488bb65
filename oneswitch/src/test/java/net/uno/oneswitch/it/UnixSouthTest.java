package net.uno.oneswitch.it;

import static net.uno.oneswitch.it.Wait.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.Main;
import net.uno.oneswitch.config.Config;
import net.uno.oneswitch.config.ConfigError;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;

/**
 * Physical switches reached over unix sockets ({@code unix:PATH}): handshake, a flow-mod and its
 * barrier on the wire, a switch whose socket appears only after the start, reconnect + reconcile
 * after the switch dropped the connection, and the config error when the transport has none.
 */
class UnixSouthTest {
  private static final OFFactory F = FakeSwitch.F;
  private Path dir;
  private FakeSwitch host;
  private FakeSwitch snic;
  private Main.Running os;

  @BeforeEach
  void dir() throws Exception {
    // A short path: a unix socket path must stay under 108 bytes.
    dir = Files.createTempDirectory(Path.of("/tmp"), "os-unix");
  }

  @AfterEach
  void down() throws Exception {
    if (os != null) {
      os.stop();
    }
    for (FakeSwitch s : new FakeSwitch[] {host, snic}) {
      if (s != null) {
        s.close();
      }
    }
    try (var s = Files.walk(dir)) {
      s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  private Config config() throws ConfigError {
    return config("unix:" + dir.resolve("host.ctl"), "unix:" + dir.resolve("snic.ctl"));
  }

  private Config config(String hostTarget, String snicTarget) throws ConfigError {
    return Config.parse(
            """
        {"dpid": "00000000000000ee", "listen": "ptcp:0:127.0.0.1", "rest": "127.0.0.1:0",
         "state_dir": "%s",
         "switches": [{"id": "host", "openflow": "%s"},
                      {"id": "snic0", "openflow": "%s"}],
         "pcie": [{"snic": "snic0", "host_port": 1, "snic_port": 100}],
         "ports": [{"vport": 1, "switch": "snic0", "port": 1, "name": "eth0"},
                   {"vport": 2, "switch": "host", "port": 100, "name": "vm0"}]}
        """
            .formatted(dir.resolve("state"), hostTarget, snicTarget));
  }

  private boolean ready(String sw) {
    try {
      return os.core()
          .exec()
          .submit(() -> os.core().south().get(sw).isReady())
          .get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }

  private static OFFlowAdd flow(int prio, int inPort, int outPort) {
    return F.buildFlowAdd()
        .setXid(50)
        .setTableId(TableId.of(0))
        .setPriority(prio)
        .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(inPort)).build())
        .setInstructions(
            List.of(
                F.instructions()
                    .applyActions(List.of(F.actions().output(OFPort.of(outPort), 0xffff)))))
        .build();
  }

  private static boolean hasRule(FakeSwitch sw, int prio) {
    return sw.flows.values().stream()
        .anyMatch(f -> f.getTableId().getValue() == 1 && f.getPriority() == prio);
  }

  @Test
  void flowModsBarriersLateSocketAndReconnectOverUnixSockets() throws Exception {
    host = new FakeSwitch(0xa, List.of(1, 100), dir.resolve("host.ctl"));
    os = Main.run(config()); // snic0's socket does not exist yet: it is retried
    waitFor(() -> ready("host"));
    assertFalse(ready("snic0"));
    snic = new FakeSwitch(0xb, List.of(1, 100), dir.resolve("snic.ctl"));
    waitFor(() -> ready("snic0"));
    waitFor(() -> host.flows.size() >= 2 && snic.flows.size() >= 2); // dispatch reconciled
    try (OfClient c = new OfClient(os.ofPort())) {
      c.send(F.buildHello().setXid(1).build());
      assertNotNull(c.expect(OFType.HELLO, -1, 5000));
      c.send(flow(10, 2, 1)); // vm0 (host) -> eth0 (snic0): tagged across PCIe
      c.send(F.buildBarrierRequest().setXid(11).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 11, 10000));
      // The barrier reply came after the host's physical barrier, so the rule is there.
      assertTrue(hasRule(host, 10), "translated rule on the host switch");
      assertTrue(
          host.logSnapshot().stream().anyMatch(m -> m.getType() == OFType.BARRIER_REQUEST),
          "a physical barrier over the unix socket");

      int before = host.connections();
      host.flows.clear(); // the switch restarted empty, dropping OneSwitch's connection
      host.disconnect();
      waitFor(() -> host.connections() > before && ready("host"));
      waitFor(() -> hasRule(host, 10)); // reconciled: reinstalled
      c.send(flow(11, 2, 1));
      c.send(F.buildBarrierRequest().setXid(12).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 12, 10000));
      assertTrue(hasRule(host, 11), "served after the reconnect");
    }
  }

  @Test
  void anEndpointInUseIsAStartErrorNamingItAndLeavesNothingBound() throws Exception {
    // was: "cannot start: ...NativeIoException: bind(..) failed: Address already in use" with a
    // stack trace, naming neither the config key nor the address
    try (var taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      String json =
          """
          {"dpid": "00000000000000ee", "listen": "ptcp:%d:127.0.0.1", "rest": "127.0.0.1:%d",
           "state_dir": "%s", "switches": [{"id": "host", "openflow": "tcp:127.0.0.1:1"}],
           "pcie": [], "ports": []}
          """;
      for (String[] c :
          new String[][] {
            {"" + port, "0", "listen 127.0.0.1:" + port}, {"0", "" + port, "rest 127.0.0.1:" + port}
          }) {
        Config cfg =
            Config.parse(
                json.formatted(
                    Integer.parseInt(c[0]), Integer.parseInt(c[1]), dir.resolve("state")));
        Main.StartError e = assertThrows(Main.StartError.class, () -> Main.run(cfg));
        assertTrue(e.getMessage().startsWith(c[2] + ": cannot bind: "), e.getMessage());
        assertTrue(
            e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("in use"), e.getMessage());
      }
    }
  }

  @Test
  void theNioFallbackServesTcpButRefusesUnixTargets() throws Exception {
    String was = System.getProperty("oneswitch.transport");
    System.setProperty("oneswitch.transport", "nio");
    try {
      ConfigError e = assertThrows(ConfigError.class, () -> Main.run(config()));
      assertEquals("switches[0].openflow", e.field(), e.getMessage());
      assertTrue(e.getMessage().contains("epoll"), e.getMessage());
      host = new FakeSwitch(0xa, List.of(1, 100));
      snic = new FakeSwitch(0xb, List.of(1, 100));
      os = Main.run(config("tcp:127.0.0.1:" + host.port(), "tcp:127.0.0.1:" + snic.port()));
      waitFor(() -> ready("host") && ready("snic0"));
    } finally {
      if (was == null) {
        System.clearProperty("oneswitch.transport");
      } else {
        System.setProperty("oneswitch.transport", was);
      }
    }
  }
}
