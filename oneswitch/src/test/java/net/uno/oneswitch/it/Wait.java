package net.uno.oneswitch.it;

import java.util.function.BooleanSupplier;

/** Polling for the integration tests. */
final class Wait {
  private Wait() {}

  /** Returns once {@code c} holds; fails the test after 20 s. */
  static void waitFor(BooleanSupplier c) throws InterruptedException {
    long end = System.currentTimeMillis() + 20000;
    while (!c.getAsBoolean()) {
      if (System.currentTimeMillis() > end) {
        throw new AssertionError("condition not reached in 20 s");
      }
      Thread.sleep(20);
    }
  }
}
