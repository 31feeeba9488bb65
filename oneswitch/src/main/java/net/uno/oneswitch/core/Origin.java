package net.uno.oneswitch.core;

/**
 * The controller message a physical message comes from: who to answer, with its xid and its first
 * bytes, if a switch refuses it.
 */
public record Origin(Session session, long xid, byte[] head) {}
