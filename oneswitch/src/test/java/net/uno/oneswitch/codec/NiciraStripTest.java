package net.uno.oneswitch.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import java.util.List;
import net.uno.oneswitch.translate.SymmetricHash;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowStatsEntry;
import org.projectfloodlight.openflow.protocol.OFFlowStatsReply;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketInReason;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/** A flow dump holding OneSwitch's multipath action reads as the same dump without it. */
class NiciraStripTest {
  private static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private static OFFlowStatsEntry entry(long cookie, int port, List<OFInstruction> inst) {
    return F.buildFlowStatsEntry()
        .setTableId(TableId.of(0))
        .setPriority(100)
        .setCookie(U64.of(cookie))
        .setPacketCount(U64.of(cookie * 10))
        .setByteCount(U64.of(cookie * 1000))
        .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(port)).build())
        .setInstructions(inst)
        .build();
  }

  private static OFFlowStatsReply reply(List<OFFlowStatsEntry> es) {
    return F.buildFlowStatsReply().setXid(5).setEntries(es).build();
  }

  private static OFInstruction apply(
      List<org.projectfloodlight.openflow.protocol.action.OFAction> a) {
    return F.instructions().applyActions(a);
  }

  private static Object decode(OFFlowStatsReply r, boolean fromSwitch) {
    ByteBuf b = Unpooled.buffer();
    r.writeTo(b);
    EmbeddedChannel ch = new EmbeddedChannel(new OfFrameDecoder(fromSwitch));
    ch.writeInbound(b);
    return ch.readInbound();
  }

  @Test
  void aDumpWithMultipathReadsWithoutIt() {
    var goto1 = F.instructions().gotoTable(TableId.of(1));
    var out2 = F.actions().output(OFPort.of(2), 0xffff);
    OFFlowStatsReply sent =
        reply(
            List.of(
                entry(1, 10, List.of(apply(List.of(SymmetricHash.ACTION)), goto1)),
                entry(2, 11, List.of(apply(List.of(out2)))),
                entry(3, 12, List.of(apply(List.of(SymmetricHash.ACTION, out2)), goto1))));
    OFFlowStatsReply want =
        reply(
            List.of(
                entry(1, 10, List.of(apply(List.of()), goto1)),
                entry(2, 11, List.of(apply(List.of(out2)))),
                entry(3, 12, List.of(apply(List.of(out2)), goto1))));
    // openflowj alone cannot read it (the reason for the strip)
    assertInstanceOf(Inbound.Bad.class, decode(sent, false));
    Inbound.Msg got = assertInstanceOf(Inbound.Msg.class, decode(sent, true));
    assertEquals(want, got.msg());
  }

  @Test
  void aPacketInReadsWithoutRegisterSeven() {
    OFPacketIn sent =
        F.buildPacketIn()
            .setXid(3)
            .setBufferId(OFBufferId.NO_BUFFER)
            .setTotalLen(5)
            .setReason(OFPacketInReason.ACTION)
            .setTableId(TableId.of(2))
            .setCookie(U64.of(9))
            .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(200)).build())
            .setData(new byte[] {1, 2, 3, 4, 5})
            .build();
    ByteBuf plain = Unpooled.buffer();
    sent.writeTo(plain);
    // As OVS sends it: the match also holds NXM_NX_REG7 (header + 4-byte value) after in_port.
    byte[] p = new byte[plain.readableBytes()];
    plain.getBytes(0, p);
    int mLen = ((p[26] & 0xff) << 8) | (p[27] & 0xff); // 4 + in_port's 8 = 12, padded to 16
    ByteBuf withReg = Unpooled.buffer();
    withReg.writeBytes(p, 0, 24 + mLen);
    withReg.writeInt(SymmetricHash.REG7_HEADER).writeInt(0x1234);
    withReg.writeZero((mLen + 8 + 7) / 8 * 8 - mLen - 8);
    withReg.writeBytes(p, 24 + (mLen + 7) / 8 * 8, p.length - 24 - (mLen + 7) / 8 * 8);
    withReg.setShort(26, mLen + 8);
    withReg.setShort(2, withReg.readableBytes());
    EmbeddedChannel raw = new EmbeddedChannel(new OfFrameDecoder(false));
    raw.writeInbound(withReg.copy());
    assertInstanceOf(Inbound.Bad.class, raw.readInbound()); // openflowj alone drops it
    EmbeddedChannel ch = new EmbeddedChannel(new OfFrameDecoder(true));
    ch.writeInbound(withReg);
    Inbound.Msg got = assertInstanceOf(Inbound.Msg.class, ch.readInbound());
    assertEquals(sent, got.msg());
  }

  @Test
  void aFlowModReadsWithoutMultipathForASwitchModel() throws Exception {
    var goto1 = F.instructions().gotoTable(TableId.of(1));
    java.util.function.Function<
            List<OFInstruction>, org.projectfloodlight.openflow.protocol.OFFlowAdd>
        add =
            inst ->
                F.buildFlowAdd()
                    .setXid(4)
                    .setPriority(100)
                    .setCookie(U64.of(7))
                    .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(3)).build())
                    .setInstructions(inst)
                    .build();
    ByteBuf b = Unpooled.buffer();
    add.apply(List.of(apply(List.of(SymmetricHash.ACTION)), goto1)).writeTo(b);
    ByteBuf stripped = NiciraStrip.flowMod(b);
    assertEquals(
        add.apply(List.of(apply(List.of()), goto1)),
        OFFactories.getGenericReader().readFrom(stripped));
  }

  @Test
  void otherFramesPassAsTheyAre() {
    ByteBuf b = Unpooled.buffer();
    reply(List.of(entry(2, 11, List.of()))).writeTo(b);
    assertSame(b, NiciraStrip.flowReply(b));
    ByteBuf echo = Unpooled.buffer();
    F.buildEchoRequest()
        .setXid(1)
        .setData(new byte[] {(byte) 0xff, (byte) 0xff})
        .build()
        .writeTo(echo);
    assertSame(echo, NiciraStrip.flowReply(echo));
    // a truncated entry: returned as it is (openflowj reports it)
    ByteBuf cut = Unpooled.buffer();
    reply(List.of(entry(1, 10, List.of(apply(List.of(SymmetricHash.ACTION)))))).writeTo(cut);
    cut.setShort(16, 0xfff0);
    assertSame(cut, NiciraStrip.flowReply(cut));
  }
}
