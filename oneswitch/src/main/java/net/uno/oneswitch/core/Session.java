package net.uno.oneswitch.core;

import java.util.concurrent.CompletableFuture;
import org.projectfloodlight.openflow.protocol.OFMessage;

/** A controller connection as the core sees it. */
public interface Session {
  void send(OFMessage m);

  /** True if the controller took the SLAVE role (no modifications). */
  boolean isSlave();

  /** True if this connection's role and async configuration (SET_ASYNC) admit async {@code m}. */
  boolean wants(OFMessage m);

  String name();

  /** The tail of this session's ordered replies (async replies chain onto it). */
  CompletableFuture<Void> tail();

  void setTail(CompletableFuture<Void> t);
}
