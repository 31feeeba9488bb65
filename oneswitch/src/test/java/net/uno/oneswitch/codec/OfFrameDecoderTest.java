package net.uno.oneswitch.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U32;

class OfFrameDecoderTest {
  private static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private static byte[] bytes(OFMessage m) {
    ByteBuf b = Unpooled.buffer();
    m.writeTo(b);
    byte[] out = new byte[b.readableBytes()];
    b.readBytes(out);
    return out;
  }

  @Test
  void roundTripsSplitAcrossReads() {
    OFMessage fm =
        F.buildFlowAdd()
            .setXid(9)
            .setTableId(TableId.of(3))
            .setPriority(7)
            .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(4)).build())
            .setInstructions(
                List.of(
                    F.instructions()
                        .applyActions(List.of(F.actions().output(OFPort.of(2), 0xffff)))))
            .build();
    OFMessage echo = F.buildEchoRequest().setXid(10).setData(new byte[] {1, 2, 3}).build();
    byte[] a = bytes(fm);
    byte[] b = bytes(echo);
    EmbeddedChannel ch = new EmbeddedChannel(new OfFrameDecoder(), new OfEncoder());
    ch.writeInbound(Unpooled.wrappedBuffer(a, 0, 5));
    ch.writeInbound(Unpooled.wrappedBuffer(a, 5, a.length - 5));
    ch.writeInbound(Unpooled.wrappedBuffer(b));
    assertEquals(fm, ((Inbound.Msg) ch.readInbound()).msg());
    assertEquals(echo, ((Inbound.Msg) ch.readInbound()).msg());
    // encoder side
    ch.writeOutbound(fm);
    ByteBuf out = ch.readOutbound();
    byte[] enc = new byte[out.readableBytes()];
    out.readBytes(enc);
    assertEquals(java.util.Arrays.toString(a), java.util.Arrays.toString(enc));
  }

  @Test
  void helloOfAnyVersionWithBitmap() {
    OFMessage h =
        F.buildHello()
            .setXid(3)
            .setElements(
                List.of(
                    F.buildHelloElemVersionbitmap()
                        .setBitmaps(List.of(U32.of((1 << 4) | (1 << 1))))
                        .build()))
            .build();
    byte[] raw = bytes(h);
    raw[0] = 6; // a future version offering 1.0 and 1.3 in its bitmap
    EmbeddedChannel ch = new EmbeddedChannel(new OfFrameDecoder());
    ch.writeInbound(Unpooled.wrappedBuffer(raw));
    Inbound.Hello got = ch.readInbound();
    assertEquals(6, got.version());
    assertEquals((1 << 4) | (1 << 1), got.bitmap());
  }

  @Test
  void badFrames() {
    EmbeddedChannel ch = new EmbeddedChannel(new OfFrameDecoder());
    ch.writeInbound(Unpooled.wrappedBuffer(new byte[] {1, 14, 0, 8, 0, 0, 0, 1}));
    assertEquals(OFBadRequestCode.BAD_VERSION, ((Inbound.Bad) ch.readInbound()).code());
    ch.writeInbound(Unpooled.wrappedBuffer(new byte[] {4, 99, 0, 8, 0, 0, 0, 2}));
    assertEquals(OFBadRequestCode.BAD_TYPE, ((Inbound.Bad) ch.readInbound()).code());
    ch.writeInbound(Unpooled.wrappedBuffer(new byte[] {4, 14, 0, 12, 0, 0, 0, 3, 1, 2, 3, 4}));
    Inbound.Bad trunc = ch.readInbound();
    assertEquals(3, trunc.xid());
    assertTrue(!trunc.fatal());
    ch.writeInbound(Unpooled.wrappedBuffer(new byte[] {4, 2, 0, 3, 0, 0, 0, 4, 9, 9}));
    Inbound.Bad fatal = ch.readInbound();
    assertTrue(fatal.fatal());
    assertEquals(OFBadRequestCode.BAD_LEN, fatal.code());
  }

  @Test
  void fuzzNeverThrowsAndKeepsFraming() {
    Random rnd = new Random(7);
    for (int round = 0; round < 2000; round++) {
      EmbeddedChannel ch = new EmbeddedChannel(new OfFrameDecoder());
      int len = 8 + rnd.nextInt(300);
      byte[] b = new byte[len];
      rnd.nextBytes(b);
      b[0] = 4;
      b[1] = (byte) rnd.nextInt(30);
      b[2] = (byte) (len >> 8);
      b[3] = (byte) len;
      ch.writeInbound(Unpooled.wrappedBuffer(b));
      // followed by a valid echo: framing must survive the garbage
      ch.writeInbound(Unpooled.wrappedBuffer(bytes(F.buildEchoRequest().setXid(5).build())));
      Object first = ch.readInbound();
      assertTrue(first instanceof Inbound, "round " + round);
      Object second = ch.readInbound();
      assertInstanceOf(Inbound.Msg.class, second, "round " + round);
      assertTrue(ch.isActive());
    }
  }
}
