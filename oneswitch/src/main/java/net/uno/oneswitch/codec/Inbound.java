package net.uno.oneswitch.codec;

import org.projectfloodlight.openflow.protocol.OFMessage;

/** What the frame decoder produces: a message, a HELLO (any version) or a bad frame. */
public sealed interface Inbound {
  /** A decoded OpenFlow 1.3 message; {@code head} = its first bytes (for error data). */
  record Msg(OFMessage msg, byte[] head) implements Inbound {}

  /** A HELLO of any version; {@code bitmap} = versions offered (bit i = version i), 0 if none. */
  record Hello(int version, long xid, long bitmap) implements Inbound {}

  /** An ONF bundle message (OpenFlow 1.3 extension); {@code head} = its first bytes. */
  record Bundle(OnfBundle.Msg msg, byte[] head) implements Inbound {}

  /** A bundle message that does not decode: answer {@code code} (an ONF bundle error). */
  record BadBundle(long xid, OnfBundle.Failed code, String why, byte[] head) implements Inbound {}

  /** A frame that could not be decoded; {@code fatal}: the stream lost framing, close it. */
  record Bad(int version, long xid, Enum<?> code, byte[] head, boolean fatal) implements Inbound {}
}
