package net.uno.oneswitch.south;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.handler.timeout.IdleStateHandler;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import net.uno.oneswitch.codec.Inbound;
import net.uno.oneswitch.codec.OfEncoder;
import net.uno.oneswitch.codec.OfFrameDecoder;
import net.uno.oneswitch.config.SwitchTarget;
import net.uno.oneswitch.io.Transport;
import org.projectfloodlight.openflow.protocol.OFBarrierReply;
import org.projectfloodlight.openflow.protocol.OFEchoReply;
import org.projectfloodlight.openflow.protocol.OFEchoRequest;
import org.projectfloodlight.openflow.protocol.OFErrorMsg;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFeaturesReply;
import org.projectfloodlight.openflow.protocol.OFFlowRemoved;
import org.projectfloodlight.openflow.protocol.OFGetConfigReply;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPortDesc;
import org.projectfloodlight.openflow.protocol.OFPortDescStatsReply;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.projectfloodlight.openflow.protocol.OFPortStatus;
import org.projectfloodlight.openflow.protocol.OFStatsReply;
import org.projectfloodlight.openflow.protocol.OFStatsReplyFlags;
import org.projectfloodlight.openflow.protocol.OFStatsRequest;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.U32;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * OneSwitch's controller connection to one physical switch: connect (reconnect with backoff),
 * handshake (HELLO, FEATURES, SET_CONFIG miss_send_len=0xffff, PORT_DESC), echo keepalive and death
 * detection ({@link Keepalive}), xid-matched requests (barriers, multipart with REPLY_MORE).
 *
 * <p>A shared switch (an operator's bridge, config {@code shared}) keeps its fragment handling: OVS
 * applies a SET_CONFIG's flags to the whole bridge, so OneSwitch first asks for them (GET_CONFIG)
 * and sends them back unchanged with its miss_send_len.
 */
public final class SouthSwitch {
  private static final Logger LOG = LoggerFactory.getLogger(SouthSwitch.class);
  static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  /**
   * How a connection is kept alive and declared dead: an ECHO_REQUEST whenever nothing was read
   * from the switch for {@code intervalMs}, and the connection closed (the switch is down: {@link
   * SouthListener#disconnected}, then reconnected with backoff) when nothing was read for {@code
   * timeoutMs} plus {@link #BACKLOG_MS_PER_MESSAGE} per message sent since the last one read (a
   * switch answers an echo only after the flow-mods queued before it: a big reconcile or a
   * pipelined install must not make a busy switch look dead; at most {@link #MAX_BACKLOG_MS} more).
   * A peer gone without a FIN or RST (a link cut, a rebooting DPU) is noticed within that bound. A
   * closed connection (EOF, RST) is noticed at once.
   */
  public record Keepalive(long intervalMs, long timeoutMs) {
    /** Extra silence allowed per message the switch may still be working through. */
    public static final double BACKLOG_MS_PER_MESSAGE = 1.0;

    /** The most extra silence a backlog allows. */
    public static final long MAX_BACKLOG_MS = 60_000;

    /** The silence allowed with {@code backlog} messages sent since the last one read. */
    public long allowedSilenceMs(long backlog) {
      return timeoutMs + Math.min(MAX_BACKLOG_MS, (long) (backlog * BACKLOG_MS_PER_MESSAGE));
    }

    /** How often a connection's silence is checked: a small part of the timeout. */
    long checkEveryMs() {
      return Math.max(10, timeoutMs / 12);
    }

    /** Config {@code echo_interval_ms} and {@code echo_timeout_ms} when not given. */
    public static final Keepalive DEFAULT =
        new Keepalive(
            net.uno.oneswitch.config.Config.ECHO_INTERVAL_MS,
            net.uno.oneswitch.config.Config.ECHO_TIMEOUT_MS);

    public Keepalive {
      if (intervalMs < 1 || timeoutMs <= intervalMs) {
        throw new IllegalArgumentException("need 0 < interval < timeout");
      }
    }
  }

  /**
   * The connection's state: {@code connected} (handshake done) or not, since {@code sinceMs} (epoch
   * ms: when it connected, went down, or was created if it never connected), why it is down ({@code
   * reason}, null when connected), and how many times it went down ({@code downs}).
   */
  public record Status(boolean connected, long sinceMs, String reason, int downs) {}

  private final String id;
  private final SwitchTarget ep;
  private final Transport transport;
  private final EventLoopGroup group;
  private final SouthListener listener;
  private final Keepalive keepalive;
  private final boolean shared;
  private volatile Status status =
      new Status(false, System.currentTimeMillis(), "never connected", 0);

  /** Why the current connection is being closed (set before the close), null if not known. */
  private volatile String closing;

  private final AtomicLong xids = new AtomicLong(0x10000);

  /**
   * Sets the hash of OneSwitch's scale-out groups ({@link SelectMethod}); null with {@code
   * -Doneswitch.select_method=ovs} (OVS's default hash).
   */
  private final SelectMethod select;

  /** Scale-out groups sent since the last barrier, to re-send with the selection method. */
  private List<SelectMethod.GroupBuckets> selectPending = new ArrayList<>();

  private final Map<Long, Pending> pending = new ConcurrentHashMap<>();
  private final Map<Integer, OFPortDesc> ports = new ConcurrentHashMap<>();
  private volatile Channel channel;
  private volatile boolean ready;
  private volatile long dpid;
  private volatile int nTables;
  private volatile boolean stopped;
  private long backoffMs = 250;

  private static final class Pending {
    final CompletableFuture<List<OFMessage>> future = new CompletableFuture<>();
    final List<OFMessage> parts = new ArrayList<>();
  }

  /** {@code group}: an event loop group of {@code transport}; the default keepalive. */
  public SouthSwitch(
      String id,
      SwitchTarget ep,
      Transport transport,
      EventLoopGroup group,
      SouthListener listener) {
    this(id, ep, transport, group, listener, Keepalive.DEFAULT);
  }

  /** {@code group}: an event loop group of {@code transport}. */
  public SouthSwitch(
      String id,
      SwitchTarget ep,
      Transport transport,
      EventLoopGroup group,
      SouthListener listener,
      Keepalive keepalive) {
    this(id, ep, transport, group, listener, keepalive, false);
  }

  /**
   * {@code group}: an event loop group of {@code transport}; {@code shared}: an operator's switch
   * (config {@code shared}).
   */
  public SouthSwitch(
      String id,
      SwitchTarget ep,
      Transport transport,
      EventLoopGroup group,
      SouthListener listener,
      Keepalive keepalive,
      boolean shared) {
    this.id = id;
    this.ep = ep;
    this.transport = transport;
    this.group = group;
    this.listener = listener;
    this.keepalive = keepalive;
    this.shared = shared;
    this.select =
        SelectMethod.Mode.of(System.getProperty("oneswitch.select_method", ""))
            .map(m -> new SelectMethod(m, id, ep, transport, group))
            .orElse(null);
  }

  public String id() {
    return id;
  }

  /** True for an operator's switch (config {@code shared}). */
  public boolean shared() {
    return shared;
  }

  public boolean isReady() {
    return ready;
  }

  /** The connection's state and when it last changed. */
  public Status status() {
    return status;
  }

  public Keepalive keepalive() {
    return keepalive;
  }

  public long dpid() {
    return dpid;
  }

  public int nTables() {
    return nTables;
  }

  public Map<Integer, OFPortDesc> ports() {
    return ports;
  }

  public void start() {
    connect();
  }

  public void stop() {
    stopped = true;
    if (select != null) {
      select.stop();
    }
    Channel c = channel;
    if (c != null) {
      c.close();
    }
  }

  private void connect() {
    if (stopped) {
      return;
    }
    var b =
        transport
            .client(group, ep)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 3000)
            .handler(
                new ChannelInitializer<Channel>() {
                  @Override
                  protected void initChannel(Channel ch) {
                    ch.pipeline()
                        .addLast(
                            new IdleStateHandler(
                                keepalive.intervalMs(), 0, 0, TimeUnit.MILLISECONDS))
                        .addLast(new OfFrameDecoder(true))
                        .addLast(new OfEncoder())
                        .addLast(new Handler());
                  }
                });
    Transport.connect(b, ep)
        .addListener(
            f -> {
              if (!f.isSuccess()) {
                LOG.debug("switch {}: connect to {} failed: {}", id, ep, f.cause().toString());
                scheduleReconnect();
              }
            });
  }

  private void scheduleReconnect() {
    if (stopped) {
      return;
    }
    long d = backoffMs;
    backoffMs = Math.min(backoffMs * 2, 5000);
    group.schedule(this::connect, d, TimeUnit.MILLISECONDS);
  }

  private List<Object> outq = new ArrayList<>(); // OFMessage or OfEncoder.WithXid

  /** Initial buffer bytes per queued message (a translated flow-mod is ~100-200 bytes). */
  private static final int BATCH_BYTES_GUESS = 160;

  /** Messages handed to this connection so far, and the last barrier's count and answer. */
  private long sent;

  private long barrierCovers = -1;
  private CompletableFuture<Void> lastBarrier;

  /** Queues a message (no reply expected) until {@link #flush}; dropped when not connected. */
  public synchronized void send(OFMessage m) {
    queue(m);
  }

  /** As {@link #send(OFMessage)}, the message going out with transaction id {@code xid}. */
  public synchronized void send(OFMessage m, long xid) {
    queue(new OfEncoder.WithXid(m, xid));
  }

  private void queue(Object m) {
    if (channel != null && ready) {
      sent++;
      Object msg = m instanceof OfEncoder.WithXid w ? w.msg() : m;
      if (select != null && SelectMethod.wants(msg)) {
        SelectMethod.GroupBuckets g = SelectMethod.of(msg);
        selectPending.add(g);
        if (g.modify() && select.usable()) {
          // Only over OpenFlow 1.5, with the method: an OF1.3 modify would reset the group to OVS's
          // default hash until the OF1.5 one came (flows live on it would change instance twice).
          // Sent at the next barrier, after what the main connection was sent before; over OF1.3
          // then if the OF1.5 one did not take (the buckets must change either way).
          return;
        }
      }
      outq.add(m);
    }
  }

  /** Writes the queued messages in one event-loop task (order kept), then {@code extra}. */
  private synchronized void drain(OFMessage extra) {
    Channel c = channel;
    List<Object> batch = outq;
    outq = new ArrayList<>();
    if (c == null) {
      return;
    }
    if (extra != null) {
      batch.add(extra);
    }
    if (batch.isEmpty()) {
      return;
    }
    c.eventLoop().execute(() -> writeBatch(c, batch));
  }

  /**
   * Encodes {@code batch} into one buffer and writes it, instead of a pass through the pipeline, a
   * buffer and an outbound entry per message (a per-message write costs far more CPU than the
   * encoding itself when rules are installed pipelined). A message that cannot be encoded fails the
   * connection as the pipeline's encoder would (exceptionCaught: logged, closed, reconnected and
   * reconciled).
   */
  private static void writeBatch(Channel c, List<Object> batch) {
    ByteBuf buf = c.alloc().ioBuffer(BATCH_BYTES_GUESS * batch.size());
    try {
      for (Object m : batch) {
        OfEncoder.encodeTo(m, buf);
      }
    } catch (RuntimeException e) {
      buf.release();
      c.pipeline().fireExceptionCaught(e);
      return;
    }
    c.writeAndFlush(buf, c.voidPromise());
  }

  public void flush() {
    drain(null);
  }

  public long nextXid() {
    return xids.incrementAndGet() & 0xffffffffL;
  }

  /** Sends a request and completes with all its replies (multipart parts collected). */
  public synchronized CompletableFuture<List<OFMessage>> request(OFMessage m) {
    sent++;
    Pending p = new Pending();
    Channel c = channel;
    if (c == null || !ready) {
      p.future.completeExceptionally(new IllegalStateException("switch " + id + " not connected"));
      return p.future;
    }
    pending.put(m.getXid(), p);
    drain(m); // after every queued message
    return p.future;
  }

  /**
   * Completes when the switch processed every message sent before. Nothing sent since the last
   * barrier: that barrier's answer covers it, so no new round trip (a controller's BARRIER after a
   * flow-mod that touched one switch waits for that switch only).
   */
  public CompletableFuture<Void> barrier() {
    return barrier(false);
  }

  /** As {@link #barrier()}; {@code fresh}: always a new round trip (remap phases). */
  public synchronized CompletableFuture<Void> barrier(boolean fresh) {
    if (!fresh && lastBarrier != null && barrierCovers == sent) {
      return lastBarrier;
    }
    CompletableFuture<Void> main =
        request(F.buildBarrierRequest().setXid(nextXid()).build()).thenApply(x -> null);
    List<SelectMethod.GroupBuckets> groups = selectPending;
    selectPending = new ArrayList<>();
    // The groups exist once the main connection's barrier is answered; their hash is set after.
    lastBarrier =
        groups.isEmpty()
            ? main
            : main.thenCompose(v -> select.apply(groups))
                .thenCompose(ok -> ok ? CompletableFuture.completedFuture(null) : fallback(groups));
    barrierCovers = sent;
    return lastBarrier;
  }

  /**
   * The scale-group modifies that went only to the OpenFlow 1.5 connection, which did not apply
   * them: sent over this one (OVS's default hash, logged by {@link SelectMethod}); completes after
   * their barrier.
   */
  private CompletableFuture<Void> fallback(List<SelectMethod.GroupBuckets> groups) {
    List<OFMessage> mods = new ArrayList<>();
    for (SelectMethod.GroupBuckets g : groups) {
      if (g.modify()) {
        mods.add(
            F.buildGroupModify()
                .setXid(nextXid())
                .setGroup(OFGroup.of(g.groupId()))
                .setGroupType(OFGroupType.SELECT)
                .setBuckets(g.buckets())
                .build());
      }
    }
    if (mods.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    synchronized (this) {
      if (channel == null || !ready) {
        return CompletableFuture.completedFuture(null);
      }
      outq.addAll(mods);
      sent += mods.size();
      return request(F.buildBarrierRequest().setXid(nextXid()).build()).thenApply(x -> null);
    }
  }

  /** A multipart request; completes with every reply part. */
  @SuppressWarnings("unchecked")
  public <T extends OFStatsReply> CompletableFuture<List<T>> stats(OFStatsRequest<?> req) {
    return request(req)
        .thenApply(
            l -> {
              List<T> out = new ArrayList<>();
              for (OFMessage m : l) {
                out.add((T) m);
              }
              return out;
            });
  }

  /** Messages handed to the connection so far. */
  private synchronized long sentCount() {
    return sent;
  }

  private final class Handler extends SimpleChannelInboundHandler<Object> {
    private long handshakeXid = -1;

    /** When a message was last read (System.nanoTime), and how many were sent by then. */
    private long lastRead;

    private long sentAtLastRead;
    private io.netty.util.concurrent.ScheduledFuture<?> silenceCheck;

    /**
     * Closes the connection once the switch has been silent for longer than the keepalive allows
     * (the echoes went unanswered): it is down.
     */
    private void checkSilence(ChannelHandlerContext ctx) {
      long silentMs = (System.nanoTime() - lastRead) / 1_000_000;
      long backlog = sentCount() - sentAtLastRead;
      long allowed = keepalive.allowedSilenceMs(backlog);
      if (silentMs >= allowed && ctx.channel().isActive()) {
        closing =
            "echo timeout: nothing from the switch for "
                + silentMs
                + " ms"
                + (backlog > 0 ? " (" + backlog + " messages unanswered)" : "");
        LOG.warn("switch {}: {}, closing", id, closing);
        ctx.close();
      }
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
      closing = null;
      lastRead = System.nanoTime();
      sentAtLastRead = sentCount();
      long every = keepalive.checkEveryMs();
      silenceCheck =
          ctx.executor()
              .scheduleAtFixedRate(() -> checkSilence(ctx), every, every, TimeUnit.MILLISECONDS);
      channel = ctx.channel();
      ctx.write(
          F.buildHello()
              .setXid(nextXid())
              .setElements(
                  List.of(
                      F.buildHelloElemVersionbitmap().setBitmaps(List.of(U32.of(1 << 4))).build()))
              .build());
      handshakeXid = nextXid();
      ctx.writeAndFlush(F.buildFeaturesRequest().setXid(handshakeXid).build());
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
      if (silenceCheck != null) {
        silenceCheck.cancel(false);
      }
      boolean was = ready;
      ready = false;
      synchronized (SouthSwitch.this) {
        channel = null;
        outq = new ArrayList<>();
        selectPending = new ArrayList<>();
        lastBarrier = null;
      }
      for (Pending p : pending.values()) {
        p.future.completeExceptionally(new IllegalStateException("switch " + id + " disconnected"));
      }
      pending.clear();
      if (was) {
        String why =
            closing != null ? closing : stopped ? "stopped" : "connection closed by the switch";
        Status s = status;
        status = new Status(false, System.currentTimeMillis(), why, s.downs() + 1);
        LOG.warn("switch {}: disconnected ({})", id, why);
        listener.disconnected(SouthSwitch.this);
      }
      scheduleReconnect();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
      if (evt instanceof IdleStateEvent e
          && e.state() == io.netty.handler.timeout.IdleState.READER_IDLE) {
        // Nothing read for an echo interval: ask (checkSilence closes at the timeout).
        ctx.writeAndFlush(F.buildEchoRequest().setXid(nextXid()).build());
      }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      if (closing == null) {
        closing = cause.toString();
      }
      LOG.warn("switch {}: {}", id, cause.toString());
      ctx.close();
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, Object in) {
      lastRead = System.nanoTime();
      sentAtLastRead = sentCount();
      if (in instanceof Inbound.Hello h) {
        if (h.version() < 4 || (h.bitmap() != 0 && (h.bitmap() & (1 << 4)) == 0)) {
          LOG.error("switch {}: does not speak OpenFlow 1.3 (hello version {})", id, h.version());
          closing = "does not speak OpenFlow 1.3";
          ctx.close();
        }
        return;
      }
      if (in instanceof Inbound.Bad b) {
        LOG.warn("switch {}: undecodable message ({})", id, b.code());
        if (b.fatal()) {
          closing = "undecodable message (" + b.code() + ")";
          ctx.close();
        }
        return;
      }
      if (!(in instanceof Inbound.Msg msg)) {
        LOG.warn("switch {}: unexpected bundle message, ignored", id);
        return;
      }
      OFMessage m = msg.msg();
      switch (m.getType()) {
        case ECHO_REQUEST ->
            ctx.writeAndFlush(
                F.buildEchoReply()
                    .setXid(m.getXid())
                    .setData(((OFEchoRequest) m).getData())
                    .build());
        case FEATURES_REPLY -> onFeatures(ctx, (OFFeaturesReply) m);
        case PACKET_IN -> listener.packetIn(SouthSwitch.this, (OFPacketIn) m);
        case FLOW_REMOVED -> listener.flowRemoved(SouthSwitch.this, (OFFlowRemoved) m);
        case PORT_STATUS -> {
          OFPortStatus ps = (OFPortStatus) m;
          int no = ps.getDesc().getPortNo().getPortNumber();
          if (ps.getReason() == OFPortReason.DELETE) {
            ports.remove(no);
          } else {
            ports.put(no, ps.getDesc());
          }
          listener.portStatus(SouthSwitch.this, ps);
        }
        case ERROR -> {
          Pending p = pending.remove(m.getXid());
          if (p != null) {
            p.future.completeExceptionally(new SwitchError((OFErrorMsg) m));
          } else {
            listener.error(SouthSwitch.this, (OFErrorMsg) m);
          }
        }
        case ECHO_REPLY -> {
          if (m instanceof OFEchoReply) {
            return;
          }
        }
        default -> reply(m);
      }
    }

    private void onFeatures(ChannelHandlerContext ctx, OFFeaturesReply fr) {
      dpid = fr.getDatapathId().getLong();
      nTables = fr.getNTables();
      CompletableFuture<Void> configured = configure(ctx);
      Pending p = new Pending();
      long x = nextXid();
      pending.put(x, p);
      ctx.writeAndFlush(F.buildPortDescStatsRequest().setXid(x).build());
      p.future
          .thenCombine(configured, (l, c) -> l)
          .whenComplete(
              (l, err) -> {
                if (err != null) {
                  LOG.warn("switch {}: port description failed: {}", id, err.toString());
                  ctx.close();
                  return;
                }
                ports.clear();
                for (OFMessage part : l) {
                  for (OFPortDesc d : ((OFPortDescStatsReply) part).getEntries()) {
                    ports.put(d.getPortNo().getPortNumber(), d);
                  }
                }
                ready = true;
                backoffMs = 250;
                status = new Status(true, System.currentTimeMillis(), null, status.downs());
                LOG.info(
                    "switch {}: connected to {} (dpid {}, {} tables, {} ports)",
                    id,
                    ep,
                    fr.getDatapathId(),
                    nTables,
                    ports.size());
                listener.connected(SouthSwitch.this);
              });
    }

    /**
     * Sets miss_send_len 0xffff (whole packets in PACKET_INs). The flags of a SET_CONFIG (fragment
     * handling) are the bridge's, not the connection's: a switch of OneSwitch's gets the default
     * (normal), a shared switch its own flags back (asked for first); if it cannot tell them, its
     * config is left alone. Completes when sent (never exceptionally).
     */
    private CompletableFuture<Void> configure(ChannelHandlerContext ctx) {
      if (!shared) {
        ctx.write(F.buildSetConfig().setXid(nextXid()).setMissSendLen(0xffff).build());
        return CompletableFuture.completedFuture(null);
      }
      Pending g = new Pending();
      long gx = nextXid();
      pending.put(gx, g);
      ctx.write(F.buildGetConfigRequest().setXid(gx).build());
      return g.future
          .thenAccept(
              l -> {
                OFGetConfigReply r = (OFGetConfigReply) l.get(0);
                ctx.writeAndFlush(
                    F.buildSetConfig()
                        .setXid(nextXid())
                        .setFlags(r.getFlags())
                        .setMissSendLen(0xffff)
                        .build());
              })
          .exceptionally(
              e -> {
                LOG.warn(
                    "switch {} (shared): no GET_CONFIG answer ({}): its config left as it is"
                        + " (PACKET_INs may be cut short)",
                    id,
                    e.toString());
                return null;
              });
    }

    private void reply(OFMessage m) {
      Pending p = pending.get(m.getXid());
      if (p == null) {
        return;
      }
      p.parts.add(m);
      boolean more =
          m instanceof OFStatsReply sr && sr.getFlags().contains(OFStatsReplyFlags.REPLY_MORE);
      if (!more) {
        pending.remove(m.getXid());
        p.future.complete(p.parts);
      }
      if (m instanceof OFBarrierReply) {
        return;
      }
    }
  }

  /** An OFPT_ERROR answering a request. */
  public static final class SwitchError extends Exception {
    private static final long serialVersionUID = 1L;
    private final transient OFErrorMsg err;

    public SwitchError(OFErrorMsg err) {
      super(err.toString());
      this.err = err;
    }

    public OFErrorMsg error() {
      return err;
    }
  }
}
