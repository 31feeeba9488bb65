package net.uno.oneswitch.south;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.util.List;
import net.uno.oneswitch.translate.Translator;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;

/**
 * The OF1.5 GROUP_MOD OneSwitch sends to set its scale groups' hash (byte layout, as OVS took it).
 */
class SelectMethodTest {
  private static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private static OFBucket out(int port) {
    return F.buildBucket()
        .setWeight(1)
        .setWatchPort(OFPort.ANY)
        .setWatchGroup(OFGroup.ANY)
        .setActions(List.of(F.actions().output(OFPort.of(port), 0xffff)))
        .build();
  }

  @Test
  void groupModCarriesBucketsWeightsAndTheSelectionMethod() {
    ByteBuf b = Unpooled.buffer();
    SelectMethod.encodeGroupMod(
        b, 7, 0xfff00001, List.of(out(1), out(2)), SelectMethod.Mode.DP_HASH);
    byte[] got = ByteBufUtil.getBytes(b);
    // Layout as OVS 3.1 accepted it (dump-groups showed selection_method=dp_hash): header, MODIFY
    // of SELECT group 0xfff00001, two buckets (an OF1.3-encoded output and a weight property each),
    // the NTR selection-method property.
    assertEquals(0x06, got[0]);
    assertEquals(15, got[1]);
    assertEquals(got.length, ((got[2] & 0xff) << 8) | (got[3] & 0xff));
    int arrayLen = ((got[16] & 0xff) << 8) | (got[17] & 0xff);
    // bucket: 8 header + 16 output + 8 weight = 32 bytes each
    assertEquals(64, arrayLen);
    assertEquals(8 + 16 + 64 + 40, got.length);
    ByteBuf p = Unpooled.wrappedBuffer(got, 24 + arrayLen, 40);
    assertEquals(0xffff, p.readUnsignedShort());
    assertEquals(40, p.readUnsignedShort());
    assertEquals(0x154d, p.readInt());
    assertEquals(1, p.readInt());
    p.skipBytes(4);
    byte[] name = new byte[16];
    p.readBytes(name);
    byte[] want = new byte[16];
    System.arraycopy("dp_hash".getBytes(), 0, want, 0, 7);
    assertArrayEquals(want, name);
    assertEquals(0L, p.readLong());
  }

  @Test
  void theSymmetricModeHashesRegisterSeven() {
    ByteBuf b = Unpooled.buffer();
    SelectMethod.encodeGroupMod(b, 7, 0xfff00001, List.of(out(1)), SelectMethod.Mode.SYMMETRIC);
    byte[] got = ByteBufUtil.getBytes(b);
    assertEquals(got.length, ((got[2] & 0xff) << 8) | (got[3] & 0xff));
    assertEquals(0, got.length % 8);
    // header 8 + group mod 16 + one bucket 32, then the property: 40 + the field's header and its
    // all-ones mask (the bytes OVS 3.1 itself sends for fields(reg7) in a GROUP_DESC reply)
    ByteBuf p = Unpooled.wrappedBuffer(got, 8 + 16 + 32, got.length - 56);
    assertEquals(0xffff, p.readUnsignedShort());
    assertEquals(48, p.readUnsignedShort());
    p.skipBytes(12);
    byte[] name = new byte[16];
    p.readBytes(name);
    assertEquals("hash", new String(name).trim());
    assertEquals(0L, p.readLong());
    assertEquals(0x00010e04, p.readInt()); // NXM_NX_REG7
    assertEquals(-1, p.readInt());
    assertEquals(48, got.length - 56);
  }

  @Test
  void theModeComesFromTheProperty() {
    assertEquals(SelectMethod.Mode.SYMMETRIC, SelectMethod.Mode.of("").orElseThrow());
    assertEquals(SelectMethod.Mode.SYMMETRIC, SelectMethod.Mode.of("symmetric").orElseThrow());
    assertEquals(SelectMethod.Mode.DP_HASH, SelectMethod.Mode.of("dp_hash").orElseThrow());
    assertTrue(SelectMethod.Mode.of("ovs").isEmpty());
    var e =
        org.junit.jupiter.api.Assertions.assertThrows(
            IllegalArgumentException.class, () -> SelectMethod.Mode.of("l4"));
    assertTrue(e.getMessage().contains("oneswitch.select_method"), e.getMessage());
  }

  @Test
  void onlyOneSwitchsOwnSelectGroupsAreResent() {
    var scale =
        F.buildGroupAdd()
            .setGroup(OFGroup.of(Translator.SCALE_GROUP_BASE))
            .setGroupType(OFGroupType.SELECT)
            .setBuckets(List.of(out(1)))
            .build();
    var controllers =
        F.buildGroupAdd()
            .setGroup(OFGroup.of(5))
            .setGroupType(OFGroupType.SELECT)
            .setBuckets(List.of(out(1)))
            .build();
    assertTrue(SelectMethod.wants(scale));
    assertFalse(SelectMethod.wants(controllers));
    assertEquals(Translator.SCALE_GROUP_BASE, SelectMethod.of(scale).groupId());
  }
}
