package net.uno.oneswitch.codec;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;

/**
 * The ONF bundle extension of OpenFlow 1.3 (ONF EXT-230, what {@code ovs-ofctl -O OpenFlow13
 * --bundle} sends): OFPT_EXPERIMENTER messages of experimenter {@code 0x4F4E4600} with exp_type
 * 2300 (bundle control: open, close, commit, discard and their replies) or 2301 (bundle add: one
 * embedded message), laid out as OpenFlow 1.4's OFPT_BUNDLE_CONTROL / OFPT_BUNDLE_ADD_MESSAGE after
 * the experimenter header. Its errors are OFPET_EXPERIMENTER errors with exp_type 2300 + the OF1.4
 * OFPBFC code. Pure encoding and decoding.
 */
public final class OnfBundle {
  public static final long ONF_EXPERIMENTER = 0x4F4E4600L;
  public static final int CONTROL = 2300;
  public static final int ADD = 2301;

  /** OF1.4 bundle control types; a reply is its request + 1. */
  public enum CtrlType {
    OPEN_REQUEST,
    OPEN_REPLY,
    CLOSE_REQUEST,
    CLOSE_REPLY,
    COMMIT_REQUEST,
    COMMIT_REPLY,
    DISCARD_REQUEST,
    DISCARD_REPLY
  }

  /** Bundle flags. */
  public static final int ATOMIC = 1;

  public static final int ORDERED = 2;

  /** OF1.4 OFPBFC_* codes (the ONF 1.3 error's exp_type is 2300 + code). */
  public enum Failed {
    UNKNOWN,
    EPERM,
    BAD_ID,
    BUNDLE_EXIST,
    BUNDLE_CLOSED,
    OUT_OF_BUNDLES,
    BAD_TYPE,
    BAD_FLAGS,
    MSG_BAD_LEN,
    MSG_BAD_XID,
    MSG_UNSUP,
    MSG_CONFLICT,
    MSG_TOO_MANY,
    MSG_FAILED,
    TIMEOUT,
    BUNDLE_IN_PROGRESS
  }

  /** A decoded bundle message. */
  public sealed interface Msg {
    long xid();

    long bundleId();

    int flags();
  }

  /** Bundle control request (or reply) {@code type}. */
  public record Control(long xid, long bundleId, CtrlType type, int flags) implements Msg {}

  /** Bundle add: {@code inner} = the embedded message's bytes (header included). */
  public record Add(long xid, long bundleId, int flags, byte[] inner) implements Msg {}

  /** A bundle message that does not decode, with the error to answer. */
  public static final class BadBundle extends Exception {
    private static final long serialVersionUID = 1L;
    private final transient Failed code;

    BadBundle(Failed code, String why) {
      super(why);
      this.code = code;
    }

    public Failed code() {
      return code;
    }
  }

  private OnfBundle() {}

  /** Whether the OF1.3 EXPERIMENTER frame is an ONF bundle message (control or add). */
  public static boolean isBundle(ByteBuf frame) {
    int i = frame.readerIndex();
    if (frame.readableBytes() < 16) {
      return false;
    }
    long exp = frame.getUnsignedInt(i + 8);
    long t = frame.getUnsignedInt(i + 12);
    return exp == ONF_EXPERIMENTER && (t == CONTROL || t == ADD);
  }

  /** Decodes an ONF bundle frame ({@link #isBundle} true). */
  public static Msg decode(ByteBuf frame) throws BadBundle {
    int i = frame.readerIndex();
    int len = frame.readableBytes();
    long xid = frame.getUnsignedInt(i + 4);
    long expType = frame.getUnsignedInt(i + 12);
    if (len < 24) {
      throw new BadBundle(Failed.MSG_BAD_LEN, "bundle message of " + len + " bytes");
    }
    long id = frame.getUnsignedInt(i + 16);
    if (expType == CONTROL) {
      int type = frame.getUnsignedShort(i + 20);
      int flags = frame.getUnsignedShort(i + 22);
      if (type >= CtrlType.values().length || type % 2 == 1) {
        throw new BadBundle(Failed.BAD_TYPE, "bundle control type " + type);
      }
      return new Control(xid, id, CtrlType.values()[type], flags);
    }
    int flags = frame.getUnsignedShort(i + 22);
    if (len < 32) {
      throw new BadBundle(Failed.MSG_BAD_LEN, "bundle add without a message");
    }
    int innerLen = frame.getUnsignedShort(i + 24 + 2);
    if (innerLen < 8 || 24 + innerLen > len) {
      throw new BadBundle(Failed.MSG_BAD_LEN, "embedded message length " + innerLen);
    }
    byte[] inner = ByteBufUtil.getBytes(frame, i + 24, innerLen);
    return new Add(xid, id, flags, inner);
  }

  /** The bundle control reply of {@code type} (a *_REPLY) for request {@code xid}. */
  public static byte[] controlReply(long xid, long bundleId, CtrlType type, int flags) {
    ByteBuf b = Unpooled.buffer(24);
    b.writeByte(4).writeByte(4).writeShort(24).writeInt((int) xid);
    b.writeInt((int) ONF_EXPERIMENTER).writeInt(CONTROL);
    b.writeInt((int) bundleId).writeShort(type.ordinal()).writeShort(flags);
    return ByteBufUtil.getBytes(b);
  }

  /**
   * The OF1.3 error of bundle failure {@code code} for request {@code xid}, with the request's
   * first bytes {@code data} (at most 64).
   */
  public static byte[] error(long xid, Failed code, byte[] data) {
    int n = data == null ? 0 : Math.min(64, data.length);
    ByteBuf b = Unpooled.buffer(16 + n);
    b.writeByte(4).writeByte(1).writeShort(16 + n).writeInt((int) xid);
    b.writeShort(0xffff).writeShort(CONTROL + code.ordinal()).writeInt((int) ONF_EXPERIMENTER);
    if (n > 0) {
      b.writeBytes(data, 0, n);
    }
    return ByteBufUtil.getBytes(b);
  }
}
