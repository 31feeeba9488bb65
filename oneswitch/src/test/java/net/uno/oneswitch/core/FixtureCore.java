package net.uno.oneswitch.core;

import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.translate.Carrier;
import net.uno.oneswitch.translate.Fixtures;

/**
 * A core over the test topology and port map (translate/Fixtures), without switches or a state
 * file: what the equivalence tests ({@link EquivalenceHarness}) and {@link TablesInfoBench} run.
 */
final class FixtureCore {
  private FixtureCore() {}

  /**
   * A core driven on {@code exec} (its thread), with the carrier mode {@code mode} and {@code
   * wireVlans}, its ports the fixtures'; waits at most {@code timeoutSeconds} for them.
   */
  static OneSwitchCore start(
      ScheduledExecutorService exec, Carrier.Mode mode, int wireVlans, long timeoutSeconds)
      throws Exception {
    OneSwitchCore core =
        new OneSwitchCore(
            Fixtures.TOPO,
            254,
            exec,
            System::currentTimeMillis,
            new Metrics(),
            null,
            mode,
            wireVlans);
    exec.submit(
            () -> {
              core.portChanges().initPorts(List.copyOf(Fixtures.PORTS.all()));
              return null;
            })
        .get(timeoutSeconds, TimeUnit.SECONDS);
    return core;
  }
}
