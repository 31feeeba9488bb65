package net.uno.oneswitch.codec;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

/**
 * Removes Open vSwitch's Nicira {@code multipath} actions from an OF1.3 FLOW multipart reply, so
 * openflowj (which has no codec for it and fails the whole reply) can read the dump.
 *
 * <p>Why: OneSwitch's dispatch rules carry that action while a vport is scaled out
 * (translate/SymmetricHash); its dumps are read for counters and reconciliation by cookie, never
 * for the actions. Pure: a frame that is not such a reply, holds no such action or does not parse
 * is returned as it is.
 */
public final class NiciraStrip {
  private static final int OF13 = 4;
  private static final int T_MULTIPART_REPLY = 19;
  private static final int MP_FLOW = 1;
  private static final int ENTRY_FIXED = 48;
  private static final int IT_WRITE_ACTIONS = 3;
  private static final int IT_APPLY_ACTIONS = 4;
  private static final long NX_VENDOR_ID = 0x00002320L;
  private static final int NXAST_MULTIPATH = 10;

  private NiciraStrip() {}

  /** {@code frame} (one whole message, read from its reader index) without multipath actions. */
  public static ByteBuf flowReply(ByteBuf frame) {
    int base = frame.readerIndex();
    int len = frame.readableBytes();
    if (len < 16
        || frame.getUnsignedByte(base) != OF13
        || frame.getUnsignedByte(base + 1) != T_MULTIPART_REPLY
        || frame.getUnsignedShort(base + 8) != MP_FLOW
        || !holdsMultipath(frame, base, len)) {
      return frame;
    }
    try {
      ByteBuf out = Unpooled.buffer(len);
      out.writeBytes(frame, base, 16);
      int pos = 16;
      while (pos < len) {
        int eLen = frame.getUnsignedShort(base + pos);
        int matchLen = frame.getUnsignedShort(base + pos + ENTRY_FIXED + 2);
        int instStart = pos + ENTRY_FIXED + (matchLen + 7) / 8 * 8;
        if (eLen < ENTRY_FIXED || pos + eLen > len || instStart > pos + eLen) {
          return frame;
        }
        int eOut = out.writerIndex();
        out.writeBytes(frame, base + pos, instStart - pos);
        int i = instStart;
        while (i < pos + eLen) {
          int iType = frame.getUnsignedShort(base + i);
          int iLen = frame.getUnsignedShort(base + i + 2);
          if (iLen < 4 || i + iLen > pos + eLen) {
            return frame;
          }
          if (iType != IT_APPLY_ACTIONS && iType != IT_WRITE_ACTIONS) {
            out.writeBytes(frame, base + i, iLen);
          } else {
            int iOut = out.writerIndex();
            out.writeBytes(frame, base + i, 8);
            for (int a = i + 8; a < i + iLen; ) {
              int aLen = frame.getUnsignedShort(base + a + 2);
              if (aLen < 4 || a + aLen > i + iLen) {
                return frame;
              }
              if (!isMultipath(frame, base + a, aLen)) {
                out.writeBytes(frame, base + a, aLen);
              }
              a += aLen;
            }
            out.setShort(iOut + 2, out.writerIndex() - iOut);
          }
          i += iLen;
        }
        out.setShort(eOut, out.writerIndex() - eOut);
        pos += eLen;
      }
      out.setShort(2, out.readableBytes());
      return out;
    } catch (IndexOutOfBoundsException e) {
      return frame;
    }
  }

  private static boolean holdsMultipath(ByteBuf f, int base, int len) {
    for (int p = base + 16; p + 10 <= base + len; p++) {
      if (f.getUnsignedShort(p) == 0xffff && isMultipath(f, p, f.getUnsignedShort(p + 2))) {
        return true;
      }
    }
    return false;
  }

  private static boolean isMultipath(ByteBuf f, int at, int aLen) {
    return aLen >= 10
        && at + 10 <= f.writerIndex()
        && f.getUnsignedShort(at) == 0xffff
        && f.getUnsignedInt(at + 4) == NX_VENDOR_ID
        && f.getUnsignedShort(at + 8) == NXAST_MULTIPATH;
  }
}
