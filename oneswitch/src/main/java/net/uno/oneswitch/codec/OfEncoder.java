package net.uno.oneswitch.codec;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.MessageToByteEncoder;
import org.projectfloodlight.openflow.protocol.OFMessage;

/** Writes openflowj messages, {@link WithXid}s and raw frames (byte arrays: ONF bundle replies). */
public final class OfEncoder extends MessageToByteEncoder<Object> {
  /**
   * {@code msg} under transaction id {@code xid}, written into its encoded header: one message
   * planned once goes out with the xid of its connection, without a copy of the message per send.
   */
  public record WithXid(OFMessage msg, long xid) {}

  @Override
  public boolean acceptOutboundMessage(Object msg) {
    return msg instanceof OFMessage || msg instanceof WithXid || msg instanceof byte[];
  }

  @Override
  protected void encode(ChannelHandlerContext ctx, Object msg, ByteBuf out) {
    encodeTo(msg, out);
  }

  /**
   * Appends {@code msg} (an {@link OFMessage} or a {@link WithXid}) to {@code out}: for writers
   * that put a batch of messages into one buffer (one pass through the pipeline and one outbound
   * entry per batch instead of per message).
   */
  public static void encodeTo(Object msg, ByteBuf out) {
    if (msg instanceof byte[] raw) {
      out.writeBytes(raw);
    } else if (msg instanceof WithXid w) {
      int start = out.writerIndex();
      w.msg().writeTo(out);
      out.setInt(start + 4, (int) w.xid()); // OpenFlow header: version, type, length, xid
    } else {
      ((OFMessage) msg).writeTo(out);
    }
  }
}
