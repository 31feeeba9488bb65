package net.uno.oneswitch.translate;

import com.google.common.hash.PrimitiveSink;
import io.netty.buffer.ByteBuf;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.action.OFAction;

/**
 * Open vSwitch's Nicira {@code multipath} action as OneSwitch uses it: {@code
 * multipath(symmetric_l3l4+udp,0,modulo_n,65536,0,NXM_NX_REG7[0..15])}, a hash of the flow's IP
 * addresses, protocol and TCP/UDP/SCTP ports that is the same in both directions of a connection,
 * written to register 7 (ovs-actions(7), "multipath").
 *
 * <p>Why: OVS 3.1's select groups hash either symmetrically without UDP ports (its default {@code
 * dp_hash}) or with UDP ports but not symmetrically (the 5-tuple {@code dp_hash}); no select method
 * does both. The dispatch rule of a mapped port computes this hash while a vport is scaled out, and
 * the scale groups pick their bucket by hashing register 7 ({@code
 * selection_method=hash,fields(reg7)}: {@code south/SelectMethod}), so both directions of a UDP or
 * TCP connection reach one instance and the UDP flows of one address pair spread.
 *
 * <p>openflowj has no codec for it: this writes the 32-byte {@code nx_action_multipath}. Flow dumps
 * that hold it are read with it stripped ({@code codec/NiciraStrip}).
 */
public final class SymmetricHash implements OFAction {
  /** The one instance (the action has no parameters). */
  public static final SymmetricHash ACTION = new SymmetricHash();

  /** NXM header of register 7 (class 1, field 7, 4 bytes), where the hash is written. */
  public static final int REG7_HEADER = 0x00010e04;

  static final int LENGTH = 32;
  static final long NX_VENDOR_ID = 0x00002320L;
  static final int NXAST_MULTIPATH = 10;
  private static final int NX_HASH_FIELDS_SYMMETRIC_L3L4_UDP = 3;
  private static final int NX_MP_ALG_MODULO_N = 0;
  private static final int LINKS = 65536;
  private static final int BITS = 16;

  private SymmetricHash() {}

  @Override
  public OFActionType getType() {
    return OFActionType.EXPERIMENTER;
  }

  @Override
  public OFVersion getVersion() {
    return OFVersion.OF_13;
  }

  @Override
  public void writeTo(ByteBuf b) {
    b.writeShort(0xffff).writeShort(LENGTH).writeInt((int) NX_VENDOR_ID);
    b.writeShort(NXAST_MULTIPATH).writeShort(NX_HASH_FIELDS_SYMMETRIC_L3L4_UDP);
    b.writeShort(0).writeShort(0); // basis, pad
    b.writeShort(NX_MP_ALG_MODULO_N).writeShort(LINKS - 1).writeInt(0); // algorithm, max_link, arg
    b.writeShort(0).writeShort(BITS - 1).writeInt(REG7_HEADER); // pad, ofs_nbits, dst
  }

  @Override
  public OFAction.Builder createBuilder() {
    throw new UnsupportedOperationException("multipath has no builder");
  }

  @Override
  public void putTo(PrimitiveSink sink) {
    sink.putInt(NXAST_MULTIPATH).putInt(REG7_HEADER);
  }

  @Override
  public String toString() {
    return "multipath(symmetric_l3l4+udp,0,modulo_n,65536,0,NXM_NX_REG7[0..15])";
  }
}
