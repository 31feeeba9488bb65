package net.uno.oneswitch.north;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.timeout.IdleState;
import io.netty.handler.timeout.IdleStateEvent;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import net.uno.oneswitch.codec.Inbound;
import net.uno.oneswitch.codec.OnfBundle;
import net.uno.oneswitch.core.OneSwitchCore;
import net.uno.oneswitch.core.Origin;
import net.uno.oneswitch.core.Session;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFCapabilities;
import org.projectfloodlight.openflow.protocol.OFControllerRole;
import org.projectfloodlight.openflow.protocol.OFEchoRequest;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFHelloFailedCode;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPacketOut;
import org.projectfloodlight.openflow.protocol.OFRoleRequest;
import org.projectfloodlight.openflow.protocol.OFSetConfig;
import org.projectfloodlight.openflow.protocol.OFStatsRequest;
import org.projectfloodlight.openflow.types.DatapathId;
import org.projectfloodlight.openflow.types.U32;
import org.projectfloodlight.openflow.types.U64;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One controller connection (passive or active): the OpenFlow 1.3 switch side. Decoded input is
 * posted to the core thread, which owns all state; replies keep request order per connection.
 */
public final class NorthHandler extends SimpleChannelInboundHandler<Object> implements Session {
  private static final Logger LOG = LoggerFactory.getLogger(NorthHandler.class);
  private static final OFFactory F = OneSwitchCore.F;

  private final OneSwitchCore core;
  private final long dpid;
  private final StatsReplies stats;
  private final BundleSession bundles;
  private volatile Channel channel;
  private volatile ConnState state = ConnState.WAIT_HELLO;
  private volatile OFControllerRole role = OFControllerRole.ROLE_EQUAL;
  // Read by the idle check on the connection's event loop too.
  private volatile CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);
  private String name = "?";
  // OF1.3 async masks, [equal/master, slave]: defaults of the spec (section A.3.10).
  private volatile long[] pktInMask = {0x3, 0x0};
  private volatile long[] portStatusMask = {0x7, 0x7};
  private volatile long[] flowRemovedMask = {0xf, 0x0};

  public NorthHandler(OneSwitchCore core, long dpid) {
    this.core = core;
    this.dpid = dpid;
    this.stats = new StatsReplies(core);
    this.bundles = new BundleSession(core, this);
  }

  public ConnState state() {
    return state;
  }

  @Override
  public void send(OFMessage m) {
    Channel c = channel;
    if (c != null && state == ConnState.ACTIVE) {
      c.writeAndFlush(m);
    }
  }

  private void sendAlways(OFMessage m) {
    Channel c = channel;
    if (c != null) {
      c.writeAndFlush(m);
    }
  }

  @Override
  public boolean isSlave() {
    return role == OFControllerRole.ROLE_SLAVE;
  }

  @Override
  public boolean wants(OFMessage m) {
    int i = isSlave() ? 1 : 0;
    if (m instanceof org.projectfloodlight.openflow.protocol.OFPacketIn p) {
      return bit(pktInMask[i], p.getReason().name(), "NO_MATCH", "ACTION", "INVALID_TTL");
    }
    if (m instanceof org.projectfloodlight.openflow.protocol.OFPortStatus p) {
      return bit(portStatusMask[i], p.getReason().name(), "ADD", "DELETE", "MODIFY");
    }
    if (m instanceof org.projectfloodlight.openflow.protocol.OFFlowRemoved f) {
      return bit(
          flowRemovedMask[i],
          f.getReason().name(),
          "IDLE_TIMEOUT",
          "HARD_TIMEOUT",
          "DELETE",
          "GROUP_DELETE");
    }
    return true;
  }

  private static boolean bit(long mask, String reason, String... names) {
    for (int b = 0; b < names.length; b++) {
      if (names[b].equals(reason)) {
        return (mask & (1L << b)) != 0;
      }
    }
    return false;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public CompletableFuture<Void> tail() {
    return tail;
  }

  @Override
  public void setTail(CompletableFuture<Void> t) {
    tail = t;
  }

  @Override
  public void channelActive(ChannelHandlerContext ctx) {
    channel = ctx.channel();
    name = String.valueOf(ctx.channel().remoteAddress());
    ctx.writeAndFlush(
        F.buildHello()
            .setXid(1)
            .setElements(
                List.of(
                    F.buildHelloElemVersionbitmap().setBitmaps(List.of(U32.of(1 << 4))).build()))
            .build());
  }

  @Override
  public void channelInactive(ChannelHandlerContext ctx) {
    state = ConnState.CLOSED;
    core.exec().execute(() -> core.controllers().remove(this));
    LOG.info("controller {} disconnected", name);
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
    if (evt instanceof IdleStateEvent e) {
      if (e.state() == IdleState.READER_IDLE && !tail.isDone()) {
        // It waits for a reply of ours (a long bundle commit): ovs-ofctl answers no echo meanwhile.
        LOG.info("controller {}: silent while a reply of ours is pending, kept", name);
      } else if (e.state() == IdleState.READER_IDLE) {
        LOG.warn("controller {}: silent for too long, closing", name);
        ctx.close();
      } else if (state == ConnState.ACTIVE) {
        ctx.writeAndFlush(F.buildEchoRequest().setXid(2).setData(new byte[0]).build());
      }
    }
  }

  @Override
  public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
    LOG.warn("controller {}: {}", name, cause.toString());
    ctx.close();
  }

  @Override
  protected void channelRead0(ChannelHandlerContext ctx, Object in) {
    core.exec()
        .execute(
            () -> {
              try {
                handle(in);
              } catch (RuntimeException e) {
                LOG.error("controller {}: internal error on {}: {}", name, in, e.toString(), e);
                if (in instanceof Inbound.Msg m) {
                  sendAlways(OfError.build(F, OFBadRequestCode.EPERM, m.msg().getXid(), m.head()));
                }
              }
            });
  }

  private void handle(Object in) {
    if (in instanceof Inbound.Bad b) {
      sendAlways(OfError.build(F, b.code(), b.xid(), b.head()));
      core.metrics().translationErrors.incrementAndGet();
      if (b.fatal()) {
        LOG.warn("controller {}: bad framing, closing", name);
        channel.close();
      }
      return;
    }
    if (in instanceof Inbound.Hello h) {
      boolean ok = h.bitmap() != 0 ? (h.bitmap() & (1 << 4)) != 0 : h.version() >= 4;
      if (!ok) {
        sendAlways(
            OfError.build(
                F, OFHelloFailedCode.INCOMPATIBLE, h.xid(), "OpenFlow 1.3 only".getBytes()));
        LOG.warn("controller {}: no common version (hello v{}), closing", name, h.version());
        channel.close();
        state = ConnState.CLOSED;
        return;
      }
      if (state == ConnState.WAIT_HELLO) {
        state = ConnState.ACTIVE;
        core.controllers().add(this);
        LOG.info("controller {} connected (OpenFlow 1.3)", name);
      }
      return;
    }
    if (in instanceof Inbound.BadBundle b) {
      core.metrics().translationErrors.incrementAndGet();
      LOG.info("controller {}: bad bundle message: {} ({})", name, b.code(), b.why());
      sendOrdered(OnfBundle.error(b.xid(), b.code(), b.head()));
      return;
    }
    if (in instanceof Inbound.Bundle b) {
      if (state != ConnState.ACTIVE) {
        sendAlways(OfError.build(F, OFHelloFailedCode.EPERM, b.msg().xid(), b.head()));
        channel.close();
        return;
      }
      bundles.handle(b.msg(), b.head());
      return;
    }
    Inbound.Msg im = (Inbound.Msg) in;
    OFMessage m = im.msg();
    if (state != ConnState.ACTIVE) {
      sendAlways(OfError.build(F, OFHelloFailedCode.EPERM, m.getXid(), im.head()));
      channel.close();
      return;
    }
    switch (m.getType()) {
      case ECHO_REQUEST ->
          send(
              F.buildEchoReply().setXid(m.getXid()).setData(((OFEchoRequest) m).getData()).build());
      case ECHO_REPLY, ERROR, EXPERIMENTER -> {
        if (m.getType() == org.projectfloodlight.openflow.protocol.OFType.EXPERIMENTER) {
          error(OFBadRequestCode.BAD_EXPERIMENTER, im);
        }
      }
      case FEATURES_REQUEST ->
          send(
              F.buildFeaturesReply()
                  .setXid(m.getXid())
                  .setDatapathId(DatapathId.of(dpid))
                  .setNBuffers(0)
                  .setNTables((short) core.virtualTables())
                  .setAuxiliaryId(org.projectfloodlight.openflow.types.OFAuxId.MAIN)
                  .setCapabilities(
                      EnumSet.of(
                          OFCapabilities.FLOW_STATS,
                          OFCapabilities.TABLE_STATS,
                          OFCapabilities.PORT_STATS,
                          OFCapabilities.GROUP_STATS))
                  .build());
      case GET_CONFIG_REQUEST ->
          send(
              F.buildGetConfigReply()
                  .setXid(m.getXid())
                  .setFlags(java.util.Set.of())
                  .setMissSendLen(core.controllers().missSendLen())
                  .build());
      case SET_CONFIG -> core.controllers().setMissSendLen(((OFSetConfig) m).getMissSendLen());
      case BARRIER_REQUEST ->
          ordered(
              core.barrierAll()
                  .thenApply(x -> List.of(F.buildBarrierReply().setXid(m.getXid()).build())));
      case ROLE_REQUEST -> role((OFRoleRequest) m);
      case SET_ASYNC -> {
        var a = (org.projectfloodlight.openflow.protocol.OFAsyncSet) m;
        pktInMask = new long[] {a.getPacketInMaskEqualMaster(), a.getPacketInMaskSlave()};
        portStatusMask = new long[] {a.getPortStatusMaskEqualMaster(), a.getPortStatusMaskSlave()};
        flowRemovedMask =
            new long[] {a.getFlowRemovedMaskEqualMaster(), a.getFlowRemovedMaskSlave()};
      }
      case GET_ASYNC_REQUEST ->
          send(
              F.buildAsyncGetReply()
                  .setXid(m.getXid())
                  .setPacketInMaskEqualMaster(pktInMask[0])
                  .setPacketInMaskSlave(pktInMask[1])
                  .setPortStatusMaskEqualMaster(portStatusMask[0])
                  .setPortStatusMaskSlave(portStatusMask[1])
                  .setFlowRemovedMaskEqualMaster(flowRemovedMask[0])
                  .setFlowRemovedMaskSlave(flowRemovedMask[1])
                  .build());
      case FLOW_MOD -> {
        if (!slaveCheck(im)) {
          try {
            core.flowMods().flowMod((OFFlowMod) m, new Origin(this, m.getXid(), im.head()));
          } catch (OfError e) {
            LOG.info(
                "controller {}: flow-mod refused (xid {}): {} ({})",
                name,
                m.getXid(),
                e.typeAndCode(),
                e.getMessage());
            send(e.toMessage(F, m.getXid(), im.head()));
          }
        }
      }
      case GROUP_MOD -> {
        if (!slaveCheck(im)) {
          try {
            core.groupMods().groupMod((OFGroupMod) m, new Origin(this, m.getXid(), im.head()));
          } catch (OfError e) {
            LOG.info(
                "controller {}: group-mod refused: {} ({})", name, e.typeAndCode(), e.getMessage());
            send(e.toMessage(F, m.getXid(), im.head()));
          }
        }
      }
      case PACKET_OUT -> {
        if (!slaveCheck(im)) {
          try {
            core.packets().packetOut((OFPacketOut) m);
          } catch (OfError e) {
            send(e.toMessage(F, m.getXid(), im.head()));
          }
        }
      }
      case STATS_REQUEST -> {
        try {
          ordered(
              stats
                  .reply((OFStatsRequest<?>) m)
                  .exceptionally(
                      e ->
                          List.of(
                              OfError.build(F, OFBadRequestCode.EPERM, m.getXid(), im.head()))));
        } catch (OfError e) {
          core.metrics().translationErrors.incrementAndGet();
          send(e.toMessage(F, m.getXid(), im.head()));
        }
      }
      default -> error(OFBadRequestCode.BAD_TYPE, im);
    }
  }

  private void error(Enum<?> code, Inbound.Msg im) {
    core.metrics().translationErrors.incrementAndGet();
    send(OfError.build(F, code, im.msg().getXid(), im.head()));
  }

  private boolean slaveCheck(Inbound.Msg im) {
    if (isSlave()) {
      error(OFBadRequestCode.IS_SLAVE, im);
      return true;
    }
    return false;
  }

  private void role(OFRoleRequest r) {
    OFControllerRole want = r.getRole();
    if (want != OFControllerRole.ROLE_NOCHANGE) {
      if (want == OFControllerRole.ROLE_MASTER) {
        for (Session s : core.controllers().sessions()) {
          if (s != this && s instanceof NorthHandler h && h.role == OFControllerRole.ROLE_MASTER) {
            h.role = OFControllerRole.ROLE_SLAVE;
          }
        }
      }
      role = want;
    }
    send(
        F.buildRoleReply()
            .setXid(r.getXid())
            .setRole(role)
            .setGenerationId(r.getGenerationId() == null ? U64.ZERO : r.getGenerationId())
            .build());
  }

  /** Sends the replies of {@code f} after every earlier async reply of this connection. */
  private void ordered(CompletableFuture<List<OFMessage>> f) {
    CompletableFuture<Void> next =
        tail.thenCompose(x -> f)
            .handleAsync(
                (l, e) -> {
                  if (e != null) {
                    LOG.warn("controller {}: async reply failed: {}", name, e.toString());
                  } else {
                    l.forEach(this::send);
                  }
                  return null;
                },
                core.exec());
    tail = next;
  }

  /** Sends raw frame {@code raw} (an ONF bundle reply or error) after every earlier async reply. */
  void sendOrdered(byte[] raw) {
    sendOrdered(CompletableFuture.completedFuture(raw));
  }

  /** Sends the raw frame {@code f} gives after every earlier async reply of this connection. */
  void sendOrdered(CompletableFuture<byte[]> f) {
    tail =
        tail.thenCompose(x -> f)
            .handleAsync(
                (raw, e) -> {
                  Channel c = channel;
                  if (e != null) {
                    LOG.warn("controller {}: bundle reply failed: {}", name, e.toString());
                  } else if (c != null && state == ConnState.ACTIVE) {
                    c.writeAndFlush(raw);
                  }
                  return null;
                },
                core.exec());
  }
}
