package net.uno.oneswitch.codec;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.MessageToByteEncoder;
import org.projectfloodlight.openflow.protocol.OFMessage;

/** Writes openflowj messages. */
public final class OfEncoder extends MessageToByteEncoder<OFMessage> {
  @Override
  protected void encode(ChannelHandlerContext ctx, OFMessage msg, ByteBuf out) {
    msg.writeTo(out);
  }
}
