package net.uno.oneswitch.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.translate.Fixtures;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class WarmUpTest {
  private final ScheduledExecutorService exec = Executors.newSingleThreadScheduledExecutor();

  @AfterEach
  void tearDown() {
    exec.shutdownNow();
  }

  @Test
  void remapsOnAScratchCoreAndLeavesTheRealOneAsItWas() throws Exception {
    OneSwitchCore real =
        new OneSwitchCore(Fixtures.TOPO, 254, exec, () -> 1_000_000L, new Metrics(), null);
    exec.submit(() -> real.portChanges().initPorts(List.copyOf(Fixtures.PORTS.all())))
        .get(10, TimeUnit.SECONDS);
    var before = exec.submit(() -> real.vswitch().ports()).get(10, TimeUnit.SECONDS);
    OneSwitchCore scratch =
        exec.submit(() -> WarmUp.run(Fixtures.TOPO, 254, exec)).get(10, TimeUnit.SECONDS);
    // The scratch core went through a prepare and a remap: its vport 3 is on the second switch.
    assertEquals("snic0", exec.submit(() -> scratch.vswitch().ports().get(3).get().sw()).get());
    assertEquals(3, (int) exec.submit(() -> scratch.vswitch().rules().size()).get());
    Thread.sleep(100); // its continuations and short windows ran on the same thread meanwhile
    assertEquals(before, exec.submit(() -> real.vswitch().ports()).get(10, TimeUnit.SECONDS));
    assertTrue(
        exec.submit(() -> real.vswitch().rules().isEmpty() && real.planner().liveTags().isEmpty())
            .get());
    assertEquals(0, real.planner().physical().flowCount());
    Topology one = new Topology("host", List.of("host"), List.of());
    assertNull(exec.submit(() -> WarmUp.run(one, 254, exec)).get(10, TimeUnit.SECONDS));
  }
}
