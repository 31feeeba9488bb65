package net.uno.oneswitch.north;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.timeout.IdleStateHandler;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.codec.OfEncoder;
import net.uno.oneswitch.codec.OfFrameDecoder;
import net.uno.oneswitch.config.Endpoint;
import net.uno.oneswitch.core.OneSwitchCore;
import net.uno.oneswitch.io.Transport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The passive OpenFlow listener and the active connections toward configured controllers. */
public final class NorthServer {
  private static final Logger LOG = LoggerFactory.getLogger(NorthServer.class);
  private final OneSwitchCore core;
  private final long dpid;
  private final Transport transport;
  private final EventLoopGroup group;
  private final Map<Endpoint, NorthHandler> active = new ConcurrentHashMap<>();
  private final Map<Endpoint, Long> backoff = new ConcurrentHashMap<>();
  private final long idleMs;
  private Channel server;
  private volatile boolean stopped;

  /**
   * {@code group}: an event loop group of {@code transport}; {@code idleMs}: a controller silent
   * this long (owing it no reply) is disconnected; OneSwitch echoes it after a sixth of that.
   */
  public NorthServer(
      OneSwitchCore core, long dpid, Transport transport, EventLoopGroup group, long idleMs) {
    this.core = core;
    this.dpid = dpid;
    this.transport = transport;
    this.group = group;
    this.idleMs = idleMs;
  }

  private ChannelInitializer<SocketChannel> init(Endpoint ctl) {
    return new ChannelInitializer<>() {
      @Override
      protected void initChannel(SocketChannel ch) {
        NorthHandler h = new NorthHandler(core, dpid);
        if (ctl != null) {
          active.put(ctl, h);
        }
        ch.pipeline()
            .addLast(new IdleStateHandler(idleMs, idleMs / 6, 0, TimeUnit.MILLISECONDS))
            .addLast(new OfFrameDecoder())
            .addLast(new OfEncoder())
            .addLast(h);
      }
    };
  }

  /** Binds the passive listener; returns the bound port. */
  public int listen(Endpoint ep) throws InterruptedException {
    server =
        new ServerBootstrap()
            .group(group)
            .channel(transport.serverChannel())
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childHandler(init(null))
            .bind(ep.host(), ep.port())
            .sync()
            .channel();
    int port = ((InetSocketAddress) server.localAddress()).getPort();
    LOG.info("OpenFlow listener on tcp:{}:{}", ep.host(), port);
    return port;
  }

  /** Connects to each controller, reconnecting with backoff. */
  public void connect(List<Endpoint> controllers) {
    controllers.forEach(this::connectOne);
  }

  private void connectOne(Endpoint ep) {
    if (stopped) {
      return;
    }
    new Bootstrap()
        .group(group)
        .channel(transport.tcpChannel())
        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 3000)
        .option(ChannelOption.TCP_NODELAY, true)
        .handler(init(ep))
        .connect(ep.host(), ep.port())
        .addListener(
            f -> {
              if (!f.isSuccess()) {
                retry(ep);
              } else {
                backoff.put(ep, 250L);
                LOG.info("connected to controller {}", ep);
                ((io.netty.channel.ChannelFuture) f)
                    .channel()
                    .closeFuture()
                    .addListener(c -> retry(ep));
              }
            });
  }

  private void retry(Endpoint ep) {
    long d = backoff.getOrDefault(ep, 250L);
    backoff.put(ep, Math.min(d * 2, 5000));
    group.schedule(() -> connectOne(ep), d, TimeUnit.MILLISECONDS);
  }

  /** Controller endpoints and whether each is connected (handshake done). */
  public Map<Endpoint, Boolean> controllerStates() {
    Map<Endpoint, Boolean> out = new java.util.LinkedHashMap<>();
    active.forEach((ep, h) -> out.put(ep, h.state() == ConnState.ACTIVE));
    return out;
  }

  public void stop() {
    stopped = true;
    if (server != null) {
      server.close();
    }
  }
}
