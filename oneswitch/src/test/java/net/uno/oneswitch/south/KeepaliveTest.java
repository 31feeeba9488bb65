package net.uno.oneswitch.south;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** When a silent switch is declared down ({@link SouthSwitch.Keepalive}). */
class KeepaliveTest {
  @Test
  void aSwitchWorkingThroughABacklogIsGivenMoreTimeUpToABound() {
    SouthSwitch.Keepalive k = new SouthSwitch.Keepalive(1000, 3000);
    assertEquals(3000, k.allowedSilenceMs(0)); // nothing it has yet to answer: the timeout
    assertEquals(3010, k.allowedSilenceMs(10)); // a remap's few messages: hardly more
    assertEquals(8000, k.allowedSilenceMs(5000)); // a reconcile of 5000 flows: 1 ms each
    assertEquals(63_000, k.allowedSilenceMs(10_000_000)); // at most a minute more
    assertEquals(250, k.checkEveryMs()); // checked 12 times per timeout
    assertEquals(10, new SouthSwitch.Keepalive(10, 20).checkEveryMs());
    assertEquals(SouthSwitch.Keepalive.DEFAULT, k);
  }

  @Test
  void theTimeoutMustBeAboveTheInterval() {
    assertThrows(IllegalArgumentException.class, () -> new SouthSwitch.Keepalive(1000, 1000));
    assertThrows(IllegalArgumentException.class, () -> new SouthSwitch.Keepalive(0, 1000));
  }
}
