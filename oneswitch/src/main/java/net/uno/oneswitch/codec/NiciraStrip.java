package net.uno.oneswitch.codec;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import net.uno.oneswitch.translate.SymmetricHash;

/**
 * Removes Open vSwitch's Nicira {@code multipath} actions from an OF1.3 FLOW multipart reply, so
 * openflowj (which has no codec for it and fails the whole reply) can read the dump, and the
 * register it writes from a PACKET_IN's match.
 *
 * <p>Why: OneSwitch's dispatch rules carry that action while a vport is scaled out
 * (translate/SymmetricHash); its dumps are read for counters and reconciliation by cookie, never
 * for the actions. Pure: a frame that is not such a reply, holds no such action or does not parse
 * is returned as it is.
 */
public final class NiciraStrip {
  private static final int OF13 = 4;
  private static final int T_PACKET_IN = 10;
  private static final int T_FLOW_MOD = 14;

  /** Offset of a FLOW_MOD's match (header, cookies, table, command, timeouts, ... pad). */
  private static final int FLOW_MOD_MATCH = 48;

  private static final int T_MULTIPART_REPLY = 19;

  /** Offset of a PACKET_IN's match: header, buffer_id, total_len, reason, table_id, cookie. */
  private static final int PACKET_IN_MATCH = 24;

  private static final int MP_FLOW = 1;
  private static final int ENTRY_FIXED = 48;
  private static final int IT_WRITE_ACTIONS = 3;
  private static final int IT_APPLY_ACTIONS = 4;
  private static final long NX_VENDOR_ID = 0x00002320L;
  private static final int NXAST_MULTIPATH = 10;

  private NiciraStrip() {}

  /**
   * {@code frame} (one whole message from a switch, read from its reader index) as openflowj can
   * read it: a flow dump without multipath actions, a PACKET_IN without the register the multipath
   * wrote (OVS reports it in the packet's match).
   */
  public static ByteBuf fromSwitch(ByteBuf frame) {
    int base = frame.readerIndex();
    if (frame.readableBytes() >= 8
        && frame.getUnsignedByte(base) == OF13
        && frame.getUnsignedByte(base + 1) == T_PACKET_IN) {
      return packetIn(frame);
    }
    return flowReply(frame);
  }

  /** A PACKET_IN without NXM register 7 in its match (else {@code frame} as it is). */
  static ByteBuf packetIn(ByteBuf frame) {
    int base = frame.readerIndex();
    int len = frame.readableBytes();
    int m = PACKET_IN_MATCH;
    if (len < m + 4) {
      return frame;
    }
    int mLen = frame.getUnsignedShort(base + m + 2);
    int padded = (mLen + 7) / 8 * 8;
    if (mLen < 4 || m + padded > len) {
      return frame;
    }
    for (int o = m + 4; o + 4 <= m + mLen; ) {
      int header = frame.getInt(base + o);
      int oLen = 4 + (header & 0xff);
      if (o + oLen > m + mLen) {
        return frame;
      }
      if (header >>> 9 == SymmetricHash.REG7_HEADER >>> 9) { // class and field: masked or not
        int newLen = mLen - oLen;
        int newPadded = (newLen + 7) / 8 * 8;
        ByteBuf out = Unpooled.buffer(len);
        out.writeBytes(frame, base, o);
        out.writeBytes(frame, base + o + oLen, m + mLen - o - oLen);
        out.writeZero(newPadded - newLen);
        out.writeBytes(frame, base + m + padded, len - m - padded);
        out.setShort(m + 2, newLen);
        out.setShort(2, out.readableBytes());
        return out;
      }
      o += oLen;
    }
    return frame;
  }

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
        if (!copyInstructions(frame, base, instStart, pos + eLen, out)) {
          return frame;
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

  /**
   * A FLOW_MOD without multipath actions (else {@code frame} as it is): how a switch model that has
   * no codec for the Nicira action (the tests' fake switch) reads OneSwitch's dispatch rules.
   */
  public static ByteBuf flowMod(ByteBuf frame) {
    int base = frame.readerIndex();
    int len = frame.readableBytes();
    if (len < FLOW_MOD_MATCH + 4
        || frame.getUnsignedByte(base) != OF13
        || frame.getUnsignedByte(base + 1) != T_FLOW_MOD
        || !holdsMultipath(frame, base, len)) {
      return frame;
    }
    try {
      int matchLen = frame.getUnsignedShort(base + FLOW_MOD_MATCH + 2);
      int instStart = FLOW_MOD_MATCH + (matchLen + 7) / 8 * 8;
      if (instStart > len) {
        return frame;
      }
      ByteBuf out = Unpooled.buffer(len);
      out.writeBytes(frame, base, instStart);
      if (!copyInstructions(frame, base, instStart, len, out)) {
        return frame;
      }
      out.setShort(2, out.readableBytes());
      return out;
    } catch (IndexOutOfBoundsException e) {
      return frame;
    }
  }

  /**
   * Copies the instructions at {@code [from, to)} of {@code frame} (offsets from {@code base}) to
   * {@code out} without multipath actions, fixing the instructions' lengths; false if they do not
   * parse.
   */
  private static boolean copyInstructions(ByteBuf frame, int base, int from, int to, ByteBuf out) {
    int i = from;
    while (i < to) {
      int iType = frame.getUnsignedShort(base + i);
      int iLen = frame.getUnsignedShort(base + i + 2);
      if (iLen < 4 || i + iLen > to) {
        return false;
      }
      if (iType != IT_APPLY_ACTIONS && iType != IT_WRITE_ACTIONS) {
        out.writeBytes(frame, base + i, iLen);
      } else {
        int iOut = out.writerIndex();
        out.writeBytes(frame, base + i, 8);
        for (int a = i + 8; a < i + iLen; ) {
          int aLen = frame.getUnsignedShort(base + a + 2);
          if (aLen < 4 || a + aLen > i + iLen) {
            return false;
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
    return true;
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
