package net.uno.oneswitch.south;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import net.uno.oneswitch.config.SwitchTarget;
import net.uno.oneswitch.io.Transport;
import net.uno.oneswitch.translate.SymmetricHash;
import net.uno.oneswitch.translate.Translator;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupAdd;
import org.projectfloodlight.openflow.protocol.OFGroupModify;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sets the selection method of OneSwitch's scale-out SELECT groups on an Open vSwitch, over a
 * second OpenFlow 1.5 connection to the same switch.
 *
 * <p>Why: without a selection method OVS (2.10+) picks buckets by {@code dp_hash} over a SYMMETRIC
 * L3/L4 hash that leaves out UDP ports, so every UDP flow of one address pair lands on one
 * instance. The method is a group property (Netronome extension) that only OpenFlow 1.5 group mods
 * carry: OVS ignores it in OF1.3 and refuses an OF1.5 message on an OF1.3 connection. So the main
 * connection installs the group as before and this one re-sends its buckets as an OF1.5 GROUP_MOD
 * MODIFY with the {@link Mode}'s method.
 *
 * <p>{@link Mode#SYMMETRIC} (the default): {@code selection_method=hash,fields(reg7)}, where the
 * dispatch rule of the port the packet came in by wrote a symmetric L3/L4 hash with UDP ports
 * ({@link SymmetricHash}): both directions of a connection take one bucket, UDP flows of one
 * address pair spread. The {@code hash} method picks the bucket while translating the flow (highest
 * random weight over bucket ids 0..n-1: equal at every group of one size), so each connection
 * through a scaled vport gets its own datapath flow. {@link Mode#DP_HASH} ({@code
 * -Doneswitch.select_method=dp_hash}): the 5-tuple {@code dp_hash}, UDP ports included but NOT
 * symmetric (tests/migration/test_scale.py lost 984 of 2,624 packets of a TCP firewall at 4
 * instances with it). {@code -Doneswitch.select_method=ovs}: none of this, OVS's own default.
 *
 * <p>Best effort: a switch that does not speak OpenFlow 1.5 (bridge {@code protocols}) or refuses
 * the modify keeps OVS's default method, logged once; nothing else depends on it.
 */
final class SelectMethod {
  private static final Logger LOG = LoggerFactory.getLogger(SelectMethod.class);
  static final int OF15 = 0x06;
  private static final int T_HELLO = 0;
  private static final int T_ERROR = 1;
  private static final int T_ECHO_REQUEST = 2;
  private static final int T_ECHO_REPLY = 3;
  private static final int T_GROUP_MOD = 15;
  private static final int T_BARRIER_REQUEST = 20;
  private static final int T_BARRIER_REPLY = 21;
  private static final int GC_MODIFY = 1;
  private static final int GT_SELECT = 1;
  private static final long BUCKET_ALL = 0xffffffffL;
  private static final long NTR_VENDOR_ID = 0x0000154dL;
  private static final int NTRT_SELECTION_METHOD = 1;
  private static final long REPLY_TIMEOUT_MS = 3000;

  /** How the scale groups pick a bucket (ovs-ofctl(8), "selection_method"). */
  enum Mode {
    /** {@code hash} over register 7, the symmetric L3/L4 hash with UDP ports. */
    SYMMETRIC("hash", SymmetricHash.REG7_HEADER),
    /** {@code dp_hash}, param 0: the IP 5-tuple (not symmetric). */
    DP_HASH("dp_hash", 0);

    final String method;

    /** The one OXM/NXM header of the {@code fields} hashed (0: none). */
    final int field;

    Mode(String method, int field) {
      this.method = method;
      this.field = field;
    }

    /**
     * The mode for {@code -Doneswitch.select_method} ({@code symmetric}, the default; {@code
     * dp_hash}; {@code ovs}: none, empty).
     */
    static Optional<Mode> of(String property) {
      return switch (property) {
        case "", "symmetric", "hash" -> Optional.of(SYMMETRIC);
        case "dp_hash" -> Optional.of(DP_HASH);
        case "ovs" -> Optional.empty();
        default ->
            throw new IllegalArgumentException(
                "oneswitch.select_method: " + property + " is not one of symmetric, dp_hash, ovs");
      };
    }
  }

  private final Mode mode;
  private final String id;
  private final SwitchTarget ep;
  private final Transport transport;
  private final EventLoopGroup group;
  private final AtomicLong xids = new AtomicLong(1);
  private final Map<Long, CompletableFuture<Void>> pending = new ConcurrentHashMap<>();
  private CompletableFuture<Channel> conn;
  private volatile boolean unsupported;
  private boolean warned;

  SelectMethod(Mode mode, String id, SwitchTarget ep, Transport transport, EventLoopGroup group) {
    this.mode = mode;
    this.id = id;
    this.ep = ep;
    this.transport = transport;
    this.group = group;
  }

  /** True for the group mods this applies to: OneSwitch's own SELECT groups. */
  static boolean wants(Object m) {
    if (m instanceof OFGroupAdd g) {
      return g.getGroupType() == OFGroupType.SELECT
          && Translator.isScaleGroup(g.getGroup().getGroupNumber());
    }
    if (m instanceof OFGroupModify g) {
      return g.getGroupType() == OFGroupType.SELECT
          && Translator.isScaleGroup(g.getGroup().getGroupNumber());
    }
    return false;
  }

  /** The group id and buckets of a message {@link #wants} accepts. */
  static GroupBuckets of(Object m) {
    if (m instanceof OFGroupAdd g) {
      return new GroupBuckets(g.getGroup().getGroupNumber(), g.getBuckets(), false);
    }
    OFGroupModify g = (OFGroupModify) m;
    return new GroupBuckets(g.getGroup().getGroupNumber(), g.getBuckets(), true);
  }

  /**
   * A SELECT group to (re-)send with the selection method; {@code modify}: a change of a group that
   * exists, sent over this connection only (see SouthSwitch), not an add the main connection made.
   */
  record GroupBuckets(int groupId, List<OFBucket> buckets, boolean modify) {}

  /**
   * Whether group modifies may go over this connection only: not known yet to lack OpenFlow 1.5
   * (the first use tells; a modify it fails to apply is re-sent over the main connection).
   */
  boolean usable() {
    return !unsupported;
  }

  /**
   * Sends {@code groups} (the adds installed on the main connection, which has processed them) with
   * the selection method; completes when the switch answered the barrier after them, true when it
   * applied all of them (never exceptionally: false when the connection failed or the switch
   * refused one, logged; the groups then keep OVS's default method).
   */
  CompletableFuture<Boolean> apply(List<GroupBuckets> groups) {
    if (groups.isEmpty()) {
      return CompletableFuture.completedFuture(true);
    }
    if (unsupported) {
      return CompletableFuture.completedFuture(false);
    }
    return connection()
        .thenCompose(
            ch -> {
              ByteBuf buf = Unpooled.buffer();
              Batch batch = new Batch();
              for (GroupBuckets g : groups) {
                long x = xids.incrementAndGet();
                batches.put(x, batch);
                batch.xids.add(x);
                encodeGroupMod(buf, x, g.groupId(), g.buckets(), mode);
              }
              long bx = xids.incrementAndGet();
              pending.put(bx, batch.done);
              header(buf, T_BARRIER_REQUEST, 8, bx);
              ch.writeAndFlush(buf);
              return batch
                  .done
                  .orTimeout(REPLY_TIMEOUT_MS, TimeUnit.MILLISECONDS)
                  .whenComplete((v, e) -> batch.xids.forEach(batches::remove))
                  .thenApply(v -> !batch.refused);
            })
        .exceptionally(
            e -> {
              warn("selection method not set: " + e);
              return false;
            });
  }

  /** The group mods of one {@link #apply}: refused when the switch answered one with an error. */
  private static final class Batch {
    final List<Long> xids = new ArrayList<>();
    final CompletableFuture<Void> done = new CompletableFuture<>();
    volatile boolean refused;
  }

  /** Group-mod xid -> its batch, until the batch's barrier is answered. */
  private final Map<Long, Batch> batches = new ConcurrentHashMap<>();

  void stop() {
    CompletableFuture<Channel> c;
    synchronized (this) {
      c = conn;
      conn = null;
    }
    if (c != null) {
      c.thenAccept(Channel::close);
    }
  }

  private void warn(String why) {
    synchronized (this) {
      if (warned) {
        LOG.debug("switch {}: {}", id, why);
        return;
      }
      warned = true;
    }
    LOG.warn(
        "switch {}: {} (scale-out groups keep OVS's default hash, which leaves out UDP ports)",
        id,
        why);
  }

  /** The OF1.5 connection, opened (HELLO exchanged) on first use and after a close. */
  private synchronized CompletableFuture<Channel> connection() {
    if (conn != null && !conn.isCompletedExceptionally()) {
      Channel c = conn.getNow(null);
      if (c == null || c.isActive()) {
        return conn;
      }
    }
    CompletableFuture<Channel> ready = new CompletableFuture<>();
    conn = ready;
    var b =
        transport
            .client(group, ep)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 3000)
            .handler(
                new ChannelInitializer<Channel>() {
                  @Override
                  protected void initChannel(Channel ch) {
                    ch.pipeline()
                        .addLast(new LengthFieldBasedFrameDecoder(65535, 2, 2, -4, 0))
                        .addLast(new Handler(ready));
                  }
                });
    Transport.connect(b, ep)
        .addListener(
            f -> {
              if (!f.isSuccess()) {
                ready.completeExceptionally(f.cause());
              }
            });
    return ready.orTimeout(REPLY_TIMEOUT_MS, TimeUnit.MILLISECONDS);
  }

  private final class Handler extends SimpleChannelInboundHandler<ByteBuf> {
    private final CompletableFuture<Channel> ready;

    Handler(CompletableFuture<Channel> ready) {
      this.ready = ready;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
      ByteBuf hello = Unpooled.buffer(16);
      header(hello, T_HELLO, 16, xids.incrementAndGet());
      // one VERSIONBITMAP element offering 1.5 only
      hello.writeShort(1).writeShort(8).writeInt(1 << OF15);
      ctx.writeAndFlush(hello);
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, ByteBuf m) {
      int version = m.getUnsignedByte(0);
      int type = m.getUnsignedByte(1);
      long xid = m.getUnsignedInt(4);
      if (type == T_HELLO) {
        if (version < OF15) {
          unsupported = true;
          ready.completeExceptionally(
              new IllegalStateException(
                  "the switch does not speak OpenFlow 1.5 (add OpenFlow15 to the bridge's"
                      + " protocols)"));
          ctx.close();
        } else {
          ready.complete(ctx.channel());
        }
      } else if (type == T_ECHO_REQUEST) {
        ByteBuf r = Unpooled.buffer(8);
        header(r, T_ECHO_REPLY, 8, xid);
        ctx.writeAndFlush(r);
      } else if (type == T_ERROR) {
        int et = m.readableBytes() >= 12 ? m.getUnsignedShort(8) : -1;
        int code = m.readableBytes() >= 12 ? m.getUnsignedShort(10) : -1;
        Batch b = batches.get(xid);
        if (b != null) {
          b.refused = true;
        }
        warn("the switch refused a selection method (error type " + et + " code " + code + ")");
      } else if (type == T_BARRIER_REPLY) {
        CompletableFuture<Void> f = pending.remove(xid);
        if (f != null) {
          f.complete(null);
        }
      }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      ready.completeExceptionally(new IllegalStateException("connection closed"));
      List<CompletableFuture<Void>> left = new ArrayList<>(pending.values());
      pending.clear();
      left.forEach(f -> f.completeExceptionally(new IllegalStateException("connection closed")));
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      ctx.close();
    }
  }

  private static void header(ByteBuf b, int type, int len, long xid) {
    b.writeByte(OF15).writeByte(type).writeShort(len).writeInt((int) xid);
  }

  /**
   * An OF1.5 GROUP_MOD MODIFY of SELECT group {@code gid} with {@code buckets} (bucket ids 0..n-1,
   * weight properties) and the NTR selection-method property of {@code mode}. The buckets' actions
   * encode as in OF1.3 (output, push_vlan and set_field are alike in both).
   */
  static void encodeGroupMod(ByteBuf b, long xid, int gid, List<OFBucket> buckets, Mode mode) {
    int start = b.writerIndex();
    header(b, T_GROUP_MOD, 0, xid);
    b.writeShort(GC_MODIFY).writeByte(GT_SELECT).writeByte(0).writeInt(gid);
    int arrayLenAt = b.writerIndex();
    b.writeShort(0).writeShort(0).writeInt((int) BUCKET_ALL);
    int bucketsStart = b.writerIndex();
    for (int i = 0; i < buckets.size(); i++) {
      OFBucket bk = buckets.get(i);
      int bStart = b.writerIndex();
      b.writeShort(0).writeShort(0).writeInt(i);
      int aStart = b.writerIndex();
      for (OFAction a : bk.getActions()) {
        a.writeTo(b);
      }
      int aLen = b.writerIndex() - aStart;
      // OFPGBPT15_WEIGHT
      b.writeShort(0).writeShort(8).writeShort(bk.getWeight()).writeShort(0);
      b.setShort(bStart, b.writerIndex() - bStart);
      b.setShort(bStart + 2, aLen);
    }
    b.setShort(arrayLenAt, b.writerIndex() - bucketsStart);
    // ntr_group_prop_selection_method: type, length, experimenter, exp_type, pad, method[16],
    // param, then each field as its header and its mask (all ones: the whole field), as OVS
    // encodes them; the length excludes any padding to 8 bytes
    int fieldsLen = mode.field == 0 ? 0 : 8;
    b.writeShort(0xffff).writeShort(40 + fieldsLen).writeInt((int) NTR_VENDOR_ID);
    b.writeInt(NTRT_SELECTION_METHOD).writeInt(0);
    byte[] name = mode.method.getBytes(StandardCharsets.US_ASCII);
    b.writeBytes(name).writeZero(16 - name.length);
    b.writeLong(0);
    if (fieldsLen > 0) {
      b.writeInt(mode.field).writeInt(-1);
    }
    b.setShort(start + 2, b.writerIndex() - start);
  }
}
