package net.uno.oneswitch.codec;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.ByteToMessageDecoder;
import java.util.List;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFMessageReader;

/**
 * Length-checked OpenFlow framing: 8-byte header, length 8..65535. A frame that does not decode
 * becomes {@link Inbound.Bad} (the connection survives); a length below 8 loses framing (fatal).
 */
public final class OfFrameDecoder extends ByteToMessageDecoder {
  public static final int OF13 = 4;
  private static final OFMessageReader<OFMessage> READER = OFFactories.getGenericReader();
  private static final int MAX_OF13_TYPE = 29;
  private static final int EXPERIMENTER = 4;

  /**
   * Frames come from a switch: flow dumps are read without Nicira multipath ({@link NiciraStrip}).
   */
  private final boolean fromSwitch;

  /** A decoder of a controller's frames. */
  public OfFrameDecoder() {
    this(false);
  }

  /** {@code fromSwitch}: the peer is a switch (its flow dumps may hold OneSwitch's multipath). */
  public OfFrameDecoder(boolean fromSwitch) {
    this.fromSwitch = fromSwitch;
  }

  @Override
  protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
    while (in.readableBytes() >= 8) {
      int idx = in.readerIndex();
      int version = in.getUnsignedByte(idx);
      int type = in.getUnsignedByte(idx + 1);
      int len = in.getUnsignedShort(idx + 2);
      long xid = in.getUnsignedInt(idx + 4);
      if (len < 8) {
        byte[] head = ByteBufUtil.getBytes(in, idx, Math.min(in.readableBytes(), 64));
        in.skipBytes(in.readableBytes());
        out.add(new Inbound.Bad(version, xid, OFBadRequestCode.BAD_LEN, head, true));
        return;
      }
      if (in.readableBytes() < len) {
        return;
      }
      byte[] head = ByteBufUtil.getBytes(in, idx, Math.min(len, 64));
      ByteBuf frame = in.readSlice(len);
      if (fromSwitch) {
        frame = NiciraStrip.fromSwitch(frame);
      }
      out.add(decodeFrame(version, type, xid, frame, head));
    }
  }

  static Inbound decodeFrame(int version, int type, long xid, ByteBuf frame, byte[] head) {
    if (type == 0) {
      return new Inbound.Hello(version, xid, helloBitmap(frame));
    }
    if (version != OF13) {
      return new Inbound.Bad(version, xid, OFBadRequestCode.BAD_VERSION, head, false);
    }
    if (type > MAX_OF13_TYPE) {
      return new Inbound.Bad(version, xid, OFBadRequestCode.BAD_TYPE, head, false);
    }
    if (type == EXPERIMENTER && OnfBundle.isBundle(frame)) {
      try {
        return new Inbound.Bundle(OnfBundle.decode(frame), head);
      } catch (OnfBundle.BadBundle e) {
        return new Inbound.BadBundle(xid, e.code(), e.getMessage(), head);
      }
    }
    try {
      OFMessage m = READER.readFrom(frame);
      if (m == null) {
        return new Inbound.Bad(version, xid, OFBadRequestCode.BAD_LEN, head, false);
      }
      return new Inbound.Msg(m, head);
    } catch (Exception e) {
      // OFParseError or a runtime error of the reader on garbage: never kill the connection.
      return new Inbound.Bad(version, xid, codeFor(type, head), head, false);
    }
  }

  private static Enum<?> codeFor(int type, byte[] head) {
    if (type == 18 || type == 19) {
      return OFBadRequestCode.BAD_STAT; // multipart with unknown/garbled body
    }
    return OFBadRequestCode.BAD_LEN;
  }

  /** Version bitmap of a HELLO's elements (OF1.3 section 7.5.1), 0 if absent or garbled. */
  static long helloBitmap(ByteBuf f) {
    int pos = 8;
    int end = f.readableBytes();
    while (pos + 4 <= end) {
      int t = f.getUnsignedShort(f.readerIndex() + pos);
      int l = f.getUnsignedShort(f.readerIndex() + pos + 2);
      if (l < 4 || pos + l > end) {
        return 0;
      }
      if (t == 1 && l >= 8) {
        return f.getUnsignedInt(f.readerIndex() + pos + 4);
      }
      pos += (l + 7) / 8 * 8;
    }
    return 0;
  }
}
