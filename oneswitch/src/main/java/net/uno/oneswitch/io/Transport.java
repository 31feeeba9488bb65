package net.uno.oneswitch.io;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import java.util.concurrent.ThreadFactory;
import net.uno.oneswitch.config.SwitchTarget;

/**
 * Netty's I/O transport for every OpenFlow connection: the native epoll transport where it loads
 * (Linux; it also gives unix domain sockets, which Netty 4.1's NIO transport lacks), else NIO (TCP
 * only). All connections share one event loop, so they must all be of the chosen transport. System
 * property {@code oneswitch.transport} = {@code epoll} | {@code nio} forces one.
 */
public enum Transport {
  EPOLL,
  NIO;

  /** The transport to use here: the property's, else epoll if it loads, else NIO. */
  public static Transport detect() {
    String forced = System.getProperty("oneswitch.transport", "");
    return switch (forced) {
      case "nio" -> NIO;
      case "epoll" -> {
        if (!Epoll.isAvailable()) {
          throw new IllegalStateException(
              "oneswitch.transport=epoll: the native epoll transport does not load here",
              Epoll.unavailabilityCause());
        }
        yield EPOLL;
      }
      case "" -> Epoll.isAvailable() ? EPOLL : NIO;
      default ->
          throw new IllegalArgumentException(
              "oneswitch.transport must be epoll or nio, got " + forced);
    };
  }

  /** Why this transport cannot reach {@code target}, or null when it can. */
  public String unsupported(SwitchTarget target) {
    if (target instanceof SwitchTarget.Unix && this != EPOLL) {
      return "unix: sockets need Netty's native epoll transport (Linux), "
          + (Epoll.isAvailable()
              ? "not NIO (oneswitch.transport=nio)"
              : "which does not load here: " + Epoll.unavailabilityCause());
    }
    return null;
  }

  public EventLoopGroup group(int threads, ThreadFactory factory) {
    return this == EPOLL
        ? new EpollEventLoopGroup(threads, factory)
        : new NioEventLoopGroup(threads, factory);
  }

  public Class<? extends ServerChannel> serverChannel() {
    return this == EPOLL ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
  }

  public Class<? extends Channel> tcpChannel() {
    return this == EPOLL ? EpollSocketChannel.class : NioSocketChannel.class;
  }

  /**
   * A client bootstrap of this transport for {@code target}'s kind of socket (TCP gets NODELAY:
   * OpenFlow is small request/reply messages); connect it with {@link #connect}.
   */
  public Bootstrap client(EventLoopGroup group, SwitchTarget target) {
    Bootstrap b = new Bootstrap().group(group);
    if (target instanceof SwitchTarget.Unix) {
      return b.channel(EpollDomainSocketChannel.class);
    }
    return b.channel(tcpChannel()).option(ChannelOption.TCP_NODELAY, true);
  }

  /** Connects {@code b} (from {@link #client}) to {@code target}. */
  public static ChannelFuture connect(Bootstrap b, SwitchTarget target) {
    if (target instanceof SwitchTarget.Unix u) {
      return b.connect(new DomainSocketAddress(u.path().toFile()));
    }
    SwitchTarget.Tcp t = (SwitchTarget.Tcp) target;
    return b.connect(t.endpoint().host(), t.endpoint().port());
  }
}
