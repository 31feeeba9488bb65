package net.uno.oneswitch;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.core.FileAppender;
import io.netty.channel.EventLoopGroup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import net.uno.oneswitch.config.Config;
import net.uno.oneswitch.config.ConfigError;
import net.uno.oneswitch.config.Endpoint;
import net.uno.oneswitch.core.Metrics;
import net.uno.oneswitch.core.OneSwitchCore;
import net.uno.oneswitch.core.Persistence;
import net.uno.oneswitch.io.Transport;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.north.NorthServer;
import net.uno.oneswitch.rest.RestServer;
import net.uno.oneswitch.south.SouthSwitch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Entry point of the OneSwitch jar. */
public final class Main {
  private Main() {}

  static final String USAGE =
      "usage: java -jar oneswitch-0.1.0-all.jar --config FILE.json [--log-file FILE]\n"
          + "  One virtual OpenFlow 1.3 switch over the host and sNIC switches (see"
          + " oneswitch/README.md).";

  public static void main(String[] args) {
    String config = null;
    String logFile = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--help", "-h" -> {
          System.out.println(USAGE);
          return;
        }
        case "--config" -> {
          if (++i >= args.length) {
            fail("--config: missing FILE");
          }
          config = args[i];
        }
        case "--log-file" -> {
          if (++i >= args.length) {
            fail("--log-file: missing FILE");
          }
          logFile = args[i];
        }
        default -> fail("unknown argument " + args[i] + " (see --help)");
      }
    }
    if (config == null) {
      fail("--config FILE is required (see --help)");
    }
    Config cfg;
    try {
      cfg = Config.load(Path.of(config));
      transportFor(cfg);
    } catch (ConfigError e) {
      // a whole-file error is named `config` already ("config: invalid JSON ...")
      fail(e.field().equals("config") ? e.getMessage() : "config: " + e.getMessage());
      return;
    } catch (IllegalArgumentException | IllegalStateException e) {
      fail(e.getMessage()); // a bad or unusable -Doneswitch.transport
      return;
    }
    if (logFile != null) {
      logToFile(logFile);
    }
    try {
      run(cfg);
    } catch (StartError e) {
      System.err.println("oneswitch: cannot start: " + e.getMessage());
      System.exit(1);
    } catch (Exception e) {
      LoggerFactory.getLogger(Main.class).error("cannot start: {}", e.toString(), e);
      System.err.println("oneswitch: cannot start: " + e);
      System.exit(1);
    }
  }

  private static void fail(String msg) {
    System.err.println("oneswitch: " + msg);
    System.exit(2);
  }

  private static void logToFile(String f) {
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    PatternLayoutEncoder enc = new PatternLayoutEncoder();
    enc.setContext(ctx);
    enc.setPattern("%d{yyyy-MM-dd HH:mm:ss.SSS} %-5level %logger{0}: %msg%n");
    enc.start();
    FileAppender<ch.qos.logback.classic.spi.ILoggingEvent> fa = new FileAppender<>();
    fa.setContext(ctx);
    fa.setFile(f);
    fa.setEncoder(enc);
    fa.start();
    ch.qos.logback.classic.Logger root = ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    root.detachAndStopAllAppenders();
    root.addAppender(fa);
  }

  /**
   * The I/O transport for {@code cfg} ({@link Transport#detect}); a switch it cannot reach is a
   * config error naming that switch.
   */
  static Transport transportFor(Config cfg) throws ConfigError {
    Transport t = Transport.detect();
    for (int i = 0; i < cfg.switches().size(); i++) {
      String why = t.unsupported(cfg.switches().get(i).openflow());
      if (why != null) {
        throw new ConfigError("switches[" + i + "].openflow", why);
      }
    }
    return t;
  }

  /** Starts everything; returns once listening (threads keep the JVM alive). */
  public static Running run(Config cfg) throws Exception {
    Logger log = LoggerFactory.getLogger(Main.class);
    Transport transport = transportFor(cfg);
    Files.createDirectories(cfg.stateDir());
    List<Topology.Pcie> links = new ArrayList<>();
    cfg.pcie().forEach(p -> links.add(new Topology.Pcie(p.snic(), p.hostPort(), p.snicPort())));
    List<String> ids = new ArrayList<>();
    cfg.switches().forEach(s -> ids.add(s.id()));
    Topology topo =
        new Topology(cfg.hostSwitch(), ids, links, cfg.sharedSwitches(), cfg.maxRules());
    // One thread runs the core AND every OpenFlow connection (north and south): a flow-mod read,
    // translated, written south, its barrier answered and the reply written north cost no thread
    // hand-off (each a wake-up on a loaded machine; they dominated a flow-mod + barrier round
    // trip).
    EventLoopGroup group =
        transport.group(
            1,
            r -> {
              Thread t = new io.netty.util.concurrent.FastThreadLocalThread(r, "oneswitch-core");
              t.setDaemon(false);
              return t;
            });
    ScheduledExecutorService exec = group.next();
    OneSwitchCore core =
        new OneSwitchCore(
            topo,
            cfg.physicalTables(),
            exec,
            System::currentTimeMillis,
            new Metrics(),
            new Persistence(cfg.stateDir()),
            cfg.carrier(),
            cfg.wireVlans());
    exec.submit(
            () -> {
              boolean restored = core.restore();
              if (!restored) {
                List<VPort> init = new ArrayList<>();
                cfg.ports()
                    .forEach(p -> init.add(new VPort(p.vport(), p.sw(), p.port(), p.name())));
                core.portChanges().initPorts(init);
                return core.state().saveNow();
              }
              return CompletableFuture.<Void>completedFuture(null);
            })
        .get()
        .get(); // state.json written (off the core thread) before anyone is told OneSwitch is up
    SouthSwitch.Keepalive keepalive =
        new SouthSwitch.Keepalive(cfg.echoIntervalMs(), cfg.echoTimeoutMs());
    for (Config.SwitchCfg s : cfg.switches()) {
      core.addSouth(
          new SouthSwitch(
              s.id(), s.openflow(), transport, group, core.southListener(), keepalive, s.shared()));
    }
    NorthServer north = new NorthServer(core, cfg.dpid(), transport, group, cfg.controllerIdleMs());
    RestServer rest = new RestServer(core, north, cfg.controllers(), cfg.token());
    int ofPort;
    int restPort;
    try {
      ofPort = bind("listen", cfg.listen(), () -> north.listen(cfg.listen()));
      restPort = bind("rest", cfg.rest(), () -> rest.start(cfg.rest()));
    } catch (StartError e) {
      north.stop(); // what was bound already, and the threads: nothing keeps running
      rest.stop();
      group.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS);
      exec.shutdown();
      throw e;
    }
    Files.writeString(
        cfg.stateDir().resolve("listen"), "tcp:" + cfg.listen().host() + ":" + ofPort + "\n");
    Files.writeString(cfg.stateDir().resolve("rest"), cfg.rest().host() + ":" + restPort + "\n");
    core.start();
    core.south().values().forEach(SouthSwitch::start);
    north.connect(cfg.controllers());
    log.info(
        "OneSwitch dpid {} up: {} virtual tables, switches {} (shared: {}), {} transport, carrier"
            + " {}, wire_vlans {}, echo every {} ms of silence, a switch down after {} ms",
        String.format("%016x", cfg.dpid()),
        core.virtualTables(),
        ids,
        cfg.sharedSwitches().isEmpty() ? "none" : new java.util.TreeSet<>(cfg.sharedSwitches()),
        transport.name().toLowerCase(java.util.Locale.ROOT),
        cfg.carrier().name().toLowerCase(java.util.Locale.ROOT),
        cfg.wireVlans(),
        cfg.echoIntervalMs(),
        cfg.echoTimeoutMs());
    Running r = new Running(core, north, rest, group, exec, ofPort, restPort);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  if (exec.isShutdown()) {
                    return; // stopped already (Running.stop, in tests): nothing left to save
                  }
                  try {
                    exec.submit(core.state()::saveNow)
                        .get(5, java.util.concurrent.TimeUnit.SECONDS)
                        .get(5, java.util.concurrent.TimeUnit.SECONDS);
                  } catch (Exception e) {
                    log.warn("final save failed: {}", e.toString());
                  }
                  r.stop();
                }));
    return r;
  }

  /** OneSwitch could not start for a reason the message names (no stack trace needed). */
  public static final class StartError extends Exception {
    private static final long serialVersionUID = 1L;

    StartError(String message, Throwable cause) {
      super(message, cause);
    }
  }

  private interface Binder {
    int bind() throws Exception;
  }

  /** Binds one endpoint; a failure (e.g. the port in use) names the config key and the address. */
  private static int bind(String key, Endpoint ep, Binder b) throws StartError {
    try {
      return b.bind();
    } catch (Exception e) {
      String why = e.getMessage() == null ? e.toString() : e.getMessage();
      throw new StartError(
          key
              + " "
              + ep.host()
              + ":"
              + ep.port()
              + ": cannot bind: "
              + why.replace("bind(..) failed: ", ""),
          e);
    }
  }

  /** A running OneSwitch (for tests). */
  public record Running(
      OneSwitchCore core,
      NorthServer north,
      RestServer rest,
      EventLoopGroup group,
      ScheduledExecutorService exec,
      int ofPort,
      int restPort) {
    public void stop() {
      north.stop();
      rest.stop();
      core.south().values().forEach(SouthSwitch::stop);
      group.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS);
      exec.shutdown();
      core.state().close();
    }
  }
}
