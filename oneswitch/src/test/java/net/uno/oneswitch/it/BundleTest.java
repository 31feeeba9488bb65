package net.uno.oneswitch.it;

import static net.uno.oneswitch.it.Wait.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.util.ArrayList;
import java.util.List;
import net.uno.oneswitch.codec.OnfBundle;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModCommand;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.protocol.errormsg.OFBadActionErrorMsg;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;

/**
 * The ONF bundle extension as ovs-ofctl sends it (OpenFlow 1.3), against fake physical switches: a
 * commit applies all or nothing, make-before-break per switch; a bad message changes nothing.
 */
class BundleTest {
  private static final OFFactory F = FakeSwitch.F;
  private TwoSwitches fx;
  private FakeSwitch host;
  private FakeSwitch snic;

  @BeforeEach
  void up() throws Exception {
    fx = TwoSwitches.options().vms(2).create();
    host = fx.host;
    snic = fx.snic;
    fx.start();
    waitFor(() -> host.flows.size() >= 3 && snic.flows.size() >= 2);
  }

  @AfterEach
  void down() throws Exception {
    fx.close();
  }

  private int rules() throws Exception {
    return fx.onCore(() -> fx.os().core().vswitch().rules().size());
  }

  private static byte[] control(long xid, long id, OnfBundle.CtrlType t, int flags) {
    ByteBuf b = Unpooled.buffer();
    b.writeByte(4).writeByte(4).writeShort(24).writeInt((int) xid);
    b.writeInt((int) OnfBundle.ONF_EXPERIMENTER).writeInt(OnfBundle.CONTROL);
    b.writeInt((int) id).writeShort(t.ordinal()).writeShort(flags);
    return ByteBufUtil.getBytes(b);
  }

  private static byte[] add(long id, int flags, OFMessage inner) {
    ByteBuf m = Unpooled.buffer();
    inner.writeTo(m);
    int len = 24 + m.readableBytes();
    ByteBuf b = Unpooled.buffer();
    b.writeByte(4).writeByte(4).writeShort(len).writeInt((int) inner.getXid());
    b.writeInt((int) OnfBundle.ONF_EXPERIMENTER).writeInt(OnfBundle.ADD);
    b.writeInt((int) id).writeShort(0).writeShort(flags).writeBytes(m);
    return ByteBufUtil.getBytes(b);
  }

  private static OFFlowMod flow(long xid, OFFlowModCommand cmd, int prio, int in, OFPort out) {
    var b = cmd == OFFlowModCommand.ADD ? F.buildFlowAdd() : F.buildFlowDeleteStrict();
    return b.setXid(xid)
        .setTableId(TableId.of(0))
        .setPriority(prio)
        .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(in)).build())
        .setInstructions(
            out == null
                ? List.of()
                : List.of(F.instructions().applyActions(List.of(F.actions().output(out, 0)))))
        .build();
  }

  /** Frames until one with {@code xid}; returns every frame read. */
  private static List<byte[]> until(OfClient c, long xid) throws Exception {
    List<byte[]> out = new ArrayList<>();
    long end = System.currentTimeMillis() + 10000;
    while (System.currentTimeMillis() < end) {
      byte[] f = c.readRaw(10000);
      assertNotNull(f, "no answer to xid " + xid);
      out.add(f);
      if (Unpooled.wrappedBuffer(f).getUnsignedInt(4) == xid) {
        return out;
      }
    }
    throw new AssertionError("no answer to xid " + xid);
  }

  /** Whether {@code f} is the ONF bundle control reply {@code type}. */
  private static boolean isReply(byte[] f, OnfBundle.CtrlType type) {
    ByteBuf b = Unpooled.wrappedBuffer(f);
    return b.getUnsignedByte(1) == 4
        && b.getUnsignedInt(8) == OnfBundle.ONF_EXPERIMENTER
        && b.getUnsignedInt(12) == OnfBundle.CONTROL
        && b.getUnsignedShort(20) == type.ordinal();
  }

  /** The ONF bundle error code of {@code f}, or null if it is not one. */
  private static OnfBundle.Failed bundleError(byte[] f) {
    ByteBuf b = Unpooled.wrappedBuffer(f);
    if (b.getUnsignedByte(1) != 1 || b.getUnsignedShort(8) != 0xffff) {
      return null;
    }
    return OnfBundle.Failed.values()[b.getUnsignedShort(10) - OnfBundle.CONTROL];
  }

  @Test
  void openAddCommitAppliesEverythingAtOnce() throws Exception {
    int flags = OnfBundle.ATOMIC | OnfBundle.ORDERED;
    try (OfClient c = fx.client()) {
      c.raw(control(10, 7, OnfBundle.CtrlType.OPEN_REQUEST, flags));
      assertTrue(isReply(until(c, 10).get(0), OnfBundle.CtrlType.OPEN_REPLY));
      c.raw(add(7, flags, flow(11, OFFlowModCommand.ADD, 10, 2, OFPort.of(3))));
      c.raw(add(7, flags, flow(12, OFFlowModCommand.ADD, 11, 3, OFPort.of(1))));
      assertEquals(0, rules(), "nothing before the commit");
      c.raw(control(13, 7, OnfBundle.CtrlType.COMMIT_REQUEST, flags));
      List<byte[]> got = until(c, 13);
      assertTrue(isReply(got.get(got.size() - 1), OnfBundle.CtrlType.COMMIT_REPLY));
      assertEquals(2, rules());
      // a committed bundle is gone
      c.raw(control(14, 7, OnfBundle.CtrlType.COMMIT_REQUEST, flags));
      assertEquals(OnfBundle.Failed.BAD_ID, bundleError(until(c, 14).get(0)));
    }
  }

  @Test
  void oneBadMessageChangesNothingAndAnswersItsError() throws Exception {
    try (OfClient c = fx.client()) {
      c.send(flow(5, OFFlowModCommand.ADD, 9, 2, OFPort.of(3)));
      c.send(F.buildBarrierRequest().setXid(6).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 6, 10000));
      int hostFlows = host.flows.size();
      c.raw(add(8, 0, flow(20, OFFlowModCommand.DELETE_STRICT, 9, 2, null)));
      c.raw(add(8, 0, flow(21, OFFlowModCommand.ADD, 10, 2, OFPort.of(3))));
      c.raw(add(8, 0, flow(22, OFFlowModCommand.ADD, 11, 3, OFPort.NORMAL))); // refused
      c.raw(control(23, 8, OnfBundle.CtrlType.COMMIT_REQUEST, 0));
      List<byte[]> got = until(c, 23);
      OFMessage inner = OFFactories.getGenericReader().readFrom(Unpooled.wrappedBuffer(got.get(0)));
      assertTrue(inner instanceof OFBadActionErrorMsg, "" + inner);
      assertEquals(22, inner.getXid());
      assertEquals(OnfBundle.Failed.MSG_FAILED, bundleError(got.get(got.size() - 1)));
      c.send(F.buildBarrierRequest().setXid(24).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 24, 10000));
      assertEquals(1, rules(), "the earlier rule stays, nothing added");
      assertEquals(hostFlows, host.flows.size());
      assertTrue(
          host.flows.values().stream()
              .anyMatch(f -> f.getPriority() == 9 && f.getTableId().getValue() == 1));
    }
  }

  @Test
  void replaceInOneBundleIsMakeBeforeBreak() throws Exception {
    try (OfClient c = fx.client()) {
      c.send(flow(5, OFFlowModCommand.ADD, 9, 2, OFPort.of(3)));
      c.send(F.buildBarrierRequest().setXid(6).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 6, 10000));
      int mark = FakeSwitch.GLOBAL.size();
      c.raw(add(9, 1, flow(30, OFFlowModCommand.DELETE_STRICT, 9, 2, null)));
      c.raw(add(9, 1, flow(31, OFFlowModCommand.ADD, 10, 2, OFPort.of(3))));
      c.raw(control(32, 9, OnfBundle.CtrlType.COMMIT_REQUEST, 1));
      List<byte[]> got = until(c, 32);
      assertTrue(isReply(got.get(got.size() - 1), OnfBundle.CtrlType.COMMIT_REPLY));
      List<OFFlowMod> sent = new ArrayList<>();
      for (var e : FakeSwitch.GLOBAL.subList(mark, FakeSwitch.GLOBAL.size())) {
        if (e.getKey() == 0xa && e.getValue() instanceof OFFlowMod fm) {
          sent.add(fm);
        }
      }
      int addAt = -1;
      int delAt = -1;
      for (int i = 0; i < sent.size(); i++) {
        if (sent.get(i).getCommand() == OFFlowModCommand.ADD && sent.get(i).getPriority() == 10) {
          addAt = i;
        }
        if (sent.get(i).getCommand().name().startsWith("DELETE") && delAt < 0) {
          delAt = i;
        }
      }
      assertTrue(addAt >= 0 && delAt > addAt, "the new rule before the old one goes: " + sent);
    }
  }

  @Test
  void discardAndProtocolErrors() throws Exception {
    try (OfClient c = fx.client()) {
      c.raw(add(3, 0, flow(40, OFFlowModCommand.ADD, 10, 2, OFPort.of(3))));
      c.raw(control(41, 3, OnfBundle.CtrlType.DISCARD_REQUEST, 0));
      assertTrue(isReply(until(c, 41).get(0), OnfBundle.CtrlType.DISCARD_REPLY));
      c.raw(control(42, 3, OnfBundle.CtrlType.COMMIT_REQUEST, 0));
      assertEquals(OnfBundle.Failed.BAD_ID, bundleError(until(c, 42).get(0)));
      c.raw(control(43, 4, OnfBundle.CtrlType.OPEN_REQUEST, 0));
      until(c, 43);
      c.raw(control(44, 4, OnfBundle.CtrlType.OPEN_REQUEST, 0));
      assertEquals(OnfBundle.Failed.BUNDLE_EXIST, bundleError(until(c, 44).get(0)));
      c.raw(control(45, 4, OnfBundle.CtrlType.CLOSE_REQUEST, 0));
      assertTrue(isReply(until(c, 45).get(0), OnfBundle.CtrlType.CLOSE_REPLY));
      c.raw(add(4, 0, flow(46, OFFlowModCommand.ADD, 10, 2, OFPort.of(3))));
      assertEquals(OnfBundle.Failed.BUNDLE_CLOSED, bundleError(until(c, 46).get(0)));
      c.raw(control(47, 5, OnfBundle.CtrlType.OPEN_REQUEST, 0x80));
      assertEquals(OnfBundle.Failed.BAD_FLAGS, bundleError(until(c, 47).get(0)));
      c.raw(add(4, 0, F.buildEchoRequest().setXid(48).setData(new byte[0]).build()));
      assertEquals(OnfBundle.Failed.MSG_UNSUP, bundleError(until(c, 48).get(0)));
      byte[] bad = add(6, 0, flow(49, OFFlowModCommand.ADD, 10, 2, OFPort.of(3)));
      bad[4 + 24] ^= 1; // the embedded xid differs from the add's
      c.raw(bad);
      assertEquals(OnfBundle.Failed.MSG_BAD_XID, bundleError(until(c, 49).get(0)));
      assertEquals(0, rules());
      // the connection still works
      c.send(F.buildBarrierRequest().setXid(50).build());
      assertNotNull(c.expect(OFType.BARRIER_REPLY, 50, 10000));
    }
  }
}
