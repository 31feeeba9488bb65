package net.uno.oneswitch.core;

import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import net.uno.oneswitch.translate.Fixtures;
import net.uno.oneswitch.translate.OfError;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.projectfloodlight.openflow.protocol.OFFlowMod;

/**
 * A core over the test topology and port map (translate/Fixtures), no switch connected, driven on
 * its own thread as the event loop drives it: the set-up of the core tests.
 */
abstract class CoreHarness {
  ScheduledExecutorService exec;
  OneSwitchCore core;
  final AtomicLong clock = new AtomicLong(1_000_000);

  @BeforeEach
  void startCore() throws Exception {
    exec = Executors.newSingleThreadScheduledExecutor();
    core = new OneSwitchCore(Fixtures.TOPO, 254, exec, clock::get, new Metrics(), null);
    on(
        () -> {
          core.portChanges().initPorts(List.copyOf(Fixtures.PORTS.all()));
          return null;
        });
  }

  @AfterEach
  void stopCore() {
    exec.shutdownNow();
  }

  /** Runs {@code c} on the core's thread. */
  <T> T on(Callable<T> c) throws Exception {
    return exec.submit(c).get(10, TimeUnit.SECONDS);
  }

  /** Applies a flow-mod that must be accepted. */
  void mod(OFFlowMod fm) throws Exception {
    on(
        () -> {
          core.flowMods().flowMod(fm);
          return null;
        });
  }

  /** The error of a flow-mod that must be refused. */
  OfError refused(OFFlowMod fm) throws Exception {
    return on(() -> assertThrows(OfError.class, () -> core.flowMods().flowMod(fm)));
  }
}
