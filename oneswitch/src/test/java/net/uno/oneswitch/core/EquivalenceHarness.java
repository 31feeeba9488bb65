package net.uno.oneswitch.core;

import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.translate.Carrier;
import net.uno.oneswitch.translate.Fixtures;
import org.junit.jupiter.api.AfterEach;

/**
 * The set-up of the equivalence tests: a core over the test topology and port map ({@link
 * FixtureCore}) with the carrier mode and wire VLANs a test starts it with, driven on its own
 * thread, and an {@link Equivalence} over it.
 */
abstract class EquivalenceHarness {
  final ScheduledExecutorService exec = Executors.newSingleThreadScheduledExecutor();
  OneSwitchCore core;
  Equivalence eq;

  /** The wire VLANs the core was started with. */
  int wireVlans;

  private final long timeoutSeconds;

  /** {@code timeoutSeconds}: how long a task on the core's thread may take. */
  EquivalenceHarness(long timeoutSeconds) {
    this.timeoutSeconds = timeoutSeconds;
  }

  @AfterEach
  void stop() {
    exec.shutdownNow();
  }

  /** Runs {@code c} on the core's thread. */
  <T> T on(Callable<T> c) throws Exception {
    return exec.submit(c).get(timeoutSeconds, TimeUnit.SECONDS);
  }

  /**
   * A core over the fixtures' port map with {@code wireVlans} and the carrier mode {@code mode}.
   */
  void start(Carrier.Mode mode, int wireVlans) throws Exception {
    this.wireVlans = wireVlans;
    core = FixtureCore.start(exec, mode, wireVlans, timeoutSeconds);
    eq = new Equivalence(Fixtures.TOPO, this::on, () -> core);
  }
}
