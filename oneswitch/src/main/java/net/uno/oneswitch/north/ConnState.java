package net.uno.oneswitch.north;

/** Controller connection states. */
public enum ConnState {
  /** TCP up, our HELLO sent, waiting for the peer's HELLO. */
  WAIT_HELLO,
  /** Version negotiated (1.3): requests are served. */
  ACTIVE,
  /** Closed (hello failure, peer gone). */
  CLOSED
}
