package net.uno.oneswitch.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.netty.buffer.ByteBuf;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.U64;

class OfEncoderTest {
  private static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private static OFMessage decode(ByteBuf b) throws Exception {
    try {
      return OFFactories.getGenericReader().readFrom(b);
    } finally {
      b.release();
    }
  }

  @Test
  void writesAMessageUnderAnotherXidWithoutChangingIt() throws Exception {
    OFMessage fm =
        F.buildFlowAdd()
            .setXid(7)
            .setCookie(U64.of(0x4000000100000001L))
            .setPriority(5)
            .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(3)).build())
            .build();
    EmbeddedChannel ch = new EmbeddedChannel(new OfEncoder());
    ch.writeOutbound(new OfEncoder.WithXid(fm, 0xfffffffeL), fm);
    OFMessage a = decode(ch.readOutbound());
    OFMessage b = decode(ch.readOutbound());
    assertEquals(0xfffffffeL, a.getXid());
    assertEquals(fm.createBuilder().setXid(0xfffffffeL).build(), a); // all else as planned
    assertEquals(fm, b); // the planned message itself is unchanged
    assertEquals(7, fm.getXid());
    ch.finishAndReleaseAll();
  }
}
