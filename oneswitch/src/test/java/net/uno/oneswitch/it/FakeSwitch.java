package net.uno.oneswitch.it;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.projectfloodlight.openflow.protocol.OFConfigFlags;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFFlowDelete;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModifyStrict;
import org.projectfloodlight.openflow.protocol.OFFlowStatsEntry;
import org.projectfloodlight.openflow.protocol.OFGroupAdd;
import org.projectfloodlight.openflow.protocol.OFGroupDelete;
import org.projectfloodlight.openflow.protocol.OFGroupDescStatsEntry;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupModFailedCode;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPortDesc;
import org.projectfloodlight.openflow.protocol.OFSetConfig;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.DatapathId;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFErrorCauseData;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * A small fake OpenFlow 1.3 physical switch for tests: a passive listener (TCP on loopback, or a
 * unix socket) that answers the handshake, keeps a flow table by cookie (an ADD replaces the flow
 * of the same table, priority and match; a delete honours the cookie mask), keeps groups (an ADD of
 * an existing id fails), answers flow/group-desc/table stats, GET_CONFIG and barriers (which a test
 * can hold back), and logs every message it receives.
 */
final class FakeSwitch implements AutoCloseable {
  static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);
  private final ServerSocketChannel server;
  private final Path unixPath;
  private final long dpid;
  private final List<Integer> ports;
  final List<OFMessage> log = new ArrayList<>();

  /** Every fake switch's received messages in one global order: (switch dpid, message). */
  static final List<Map.Entry<Long, OFMessage>> GLOBAL =
      java.util.Collections.synchronizedList(new ArrayList<>());

  final Map<Long, OFFlowMod> flows = new ConcurrentHashMap<>();

  /**
   * Its TABLE statistics, {lookups, matches} per table, as a test sets them (a switch's table
   * counters: they keep counting what deleted flows matched); tables not in it are not reported.
   */
  final Map<Integer, long[]> tableStats = new ConcurrentHashMap<>();

  /** The groups it holds (GROUP_MOD add/modify/delete), listed in its GROUP_DESC reply. */
  final Map<Integer, OFGroupMod> groups = new ConcurrentHashMap<>();

  private volatile SocketChannel sock;

  /** Dead: every connection is closed at once (a switch whose vswitchd is gone). */
  private volatile boolean dead;

  /** Silent: reads and never answers (a peer gone without a FIN, e.g. a link cut). */
  private volatile boolean silent;

  private volatile CountDownLatch barrierGate;

  /** Its SET_CONFIG flags (fragment handling), bridge-wide as in OVS: GET_CONFIG answers them. */
  volatile Set<OFConfigFlags> configFlags = Set.of();

  /** FLOW_MODs this switch refuses with BAD_ACTION/BAD_TAG (as OVS does a third VLAN header). */
  volatile java.util.function.Predicate<OFFlowMod> refuse = fm -> false;

  private volatile int connections;
  private final Thread acceptor;

  FakeSwitch(long dpid, List<Integer> ports) throws IOException {
    this(dpid, ports, null);
  }

  /** {@code unixPath}: listen on that unix socket (created now), else on a loopback TCP port. */
  FakeSwitch(long dpid, List<Integer> ports, Path unixPath) throws IOException {
    this.unixPath = unixPath;
    if (unixPath == null) {
      server = ServerSocketChannel.open();
      server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 5);
    } else {
      server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
      server.bind(UnixDomainSocketAddress.of(unixPath), 5);
    }
    this.dpid = dpid;
    this.ports = ports;
    acceptor = new Thread(this::acceptLoop, "fake-switch-" + dpid);
    acceptor.setDaemon(true);
    acceptor.start();
  }

  int port() throws IOException {
    return ((InetSocketAddress) server.getLocalAddress()).getPort();
  }

  int connections() {
    return connections;
  }

  void holdBarriers() {
    barrierGate = new CountDownLatch(1);
  }

  void releaseBarriers() {
    CountDownLatch g = barrierGate;
    barrierGate = null;
    if (g != null) {
      g.countDown();
    }
  }

  /** Sends {@code m} to OneSwitch on the current connection (e.g. a PACKET_IN). */
  void send(OFMessage m) throws IOException {
    write(sock, m);
  }

  synchronized List<OFMessage> logSnapshot() {
    return new ArrayList<>(log);
  }

  /**
   * Dies as a rebooting switch does: the connection closes, every new one is closed at once, and
   * with {@code wipe} its flows and groups are gone (OVS keeps none across a restart).
   */
  void die(boolean wipe) throws IOException {
    dead = true;
    if (wipe) {
      flows.clear();
      groups.clear();
    }
    disconnect();
  }

  /**
   * Goes silent, keeping its connection open: reads and answers nothing (not even an echo), as a
   * peer gone without a FIN; new connections too. Its tables stay.
   */
  void goSilent() {
    silent = true;
  }

  /** Comes back: answers new connections again (and the current one, if silent). */
  void revive() {
    dead = false;
    silent = false;
  }

  /** Drops the current connection (OneSwitch should reconnect). */
  void disconnect() throws IOException {
    SocketChannel s = sock;
    if (s != null) {
      s.close();
    }
  }

  private void acceptLoop() {
    while (server.isOpen()) {
      try {
        SocketChannel s = server.accept();
        if (dead) {
          s.close();
          continue;
        }
        SocketChannel before = sock;
        sock = s;
        connections++;
        Thread t = new Thread(() -> serve(s, before), "fake-conn");
        t.setDaemon(true);
        t.start();
      } catch (IOException e) {
        return;
      }
    }
  }

  // Channel read and write take separate locks, so a barrier released from another thread can be
  // written while the serving thread blocks in a read (the Channels streams share one lock).
  private synchronized void write(SocketChannel s, OFMessage m) throws IOException {
    ByteBuf b = Unpooled.buffer();
    m.writeTo(b);
    ByteBuffer out = b.nioBuffer();
    while (out.hasRemaining()) {
      s.write(out);
    }
  }

  private static void readFully(SocketChannel s, ByteBuffer into) throws IOException {
    while (into.hasRemaining()) {
      if (s.read(into) < 0) {
        throw new IOException("closed");
      }
    }
  }

  /**
   * Serves connection {@code s} ({@code before}: the connection it replaced). One that offers no
   * OpenFlow 1.3 (OneSwitch's OF1.5 connection for the select method) is answered by the HELLO and
   * closed, as by an OF1.3-only switch, and does not replace the current one.
   */
  private void serve(SocketChannel s, SocketChannel before) {
    boolean first = true;
    try {
      if (!silent) {
        write(s, F.buildHello().setXid(1).build());
      }
      while (true) {
        ByteBuffer hdr = ByteBuffer.allocate(8);
        readFully(s, hdr);
        int len = hdr.getShort(2) & 0xffff;
        ByteBuffer all = ByteBuffer.allocate(len).put(hdr.flip());
        readFully(s, all);
        if (first && all.get(0) != 4) { // not OpenFlow 1.3
          synchronized (this) {
            if (sock == s) {
              sock = before;
              connections--;
            }
          }
          s.close();
          return;
        }
        OFMessage m =
            OFFactories.getGenericReader()
                .readFrom(
                    net.uno.oneswitch.codec.NiciraStrip.flowMod(
                        Unpooled.wrappedBuffer(all.flip())));
        first = false;
        synchronized (this) {
          log.add(m);
        }
        GLOBAL.add(Map.entry(dpid, m));
        if (!silent) {
          handle(s, m);
        }
      }
    } catch (Exception e) {
      // connection closed
    }
  }

  private void handle(SocketChannel s, OFMessage m) throws Exception {
    switch (m.getType()) {
      case FEATURES_REQUEST ->
          write(
              s,
              F.buildFeaturesReply()
                  .setXid(m.getXid())
                  .setDatapathId(DatapathId.of(dpid))
                  .setNTables((short) 254)
                  .setNBuffers(0)
                  .build());
      case ECHO_REQUEST -> write(s, F.buildEchoReply().setXid(m.getXid()).build());
      case BARRIER_REQUEST -> {
        CountDownLatch g = barrierGate;
        if (g != null) {
          Thread t =
              new Thread(
                  () -> {
                    try {
                      g.await(30, TimeUnit.SECONDS);
                      write(s, F.buildBarrierReply().setXid(m.getXid()).build());
                    } catch (Exception e) {
                      // closed
                    }
                  });
          t.setDaemon(true);
          t.start();
        } else {
          write(s, F.buildBarrierReply().setXid(m.getXid()).build());
        }
      }
      case GET_CONFIG_REQUEST ->
          write(
              s,
              F.buildGetConfigReply()
                  .setXid(m.getXid())
                  .setFlags(configFlags)
                  .setMissSendLen(128)
                  .build());
      case SET_CONFIG -> configFlags = ((OFSetConfig) m).getFlags(); // bridge-wide, as in OVS
      case GROUP_MOD -> {
        OFGroupMod gm = (OFGroupMod) m;
        int id = gm.getGroup().getGroupNumber();
        if (gm instanceof OFGroupDelete) {
          if (gm.getGroup().equals(OFGroup.ALL)) {
            groups.clear();
          } else {
            groups.remove(id);
          }
        } else if (gm instanceof OFGroupAdd && groups.containsKey(id)) {
          // As OVS: an ADD of an existing id changes nothing and fails.
          write(
              s,
              F.errorMsgs()
                  .buildGroupModFailedErrorMsg()
                  .setXid(m.getXid())
                  .setCode(OFGroupModFailedCode.GROUP_EXISTS)
                  .setData(OFErrorCauseData.of(new byte[0], OFVersion.OF_13))
                  .build());
        } else {
          groups.put(id, gm);
        }
      }
      case FLOW_MOD -> {
        OFFlowMod fm = (OFFlowMod) m;
        long c = fm.getCookie().getValue();
        if (refuse.test(fm)) {
          write(
              s,
              F.errorMsgs()
                  .buildBadActionErrorMsg()
                  .setXid(m.getXid())
                  .setCode(org.projectfloodlight.openflow.protocol.OFBadActionCode.BAD_TAG)
                  .setData(
                      org.projectfloodlight.openflow.types.OFErrorCauseData.of(
                          new byte[0], OFVersion.OF_13))
                  .build());
          return;
        }
        if (fm instanceof OFFlowAdd) {
          // As OVS: an ADD replaces the flow of the same table, priority and match (its cookie
          // too).
          flows
              .values()
              .removeIf(
                  o ->
                      o.getTableId().equals(fm.getTableId())
                          && o.getPriority() == fm.getPriority()
                          && o.getMatch().equals(fm.getMatch()));
          flows.put(c, fm);
        } else if (fm instanceof OFFlowModifyStrict) {
          OFFlowMod old = flows.get(c);
          if (old != null) {
            flows.put(c, old.createBuilder().setInstructions(fm.getInstructions()).build());
          }
        } else if (fm instanceof OFFlowDelete) {
          // Every flow of the table (or all) whose cookie matches under the cookie mask and whose
          // match equals the delete's (an empty match: any).
          long mask = fm.getCookieMask().getValue();
          boolean anyTable = fm.getTableId().equals(TableId.ALL);
          boolean anyMatch = !fm.getMatch().getMatchFields().iterator().hasNext();
          List<OFFlowMod> gone = new ArrayList<>();
          for (OFFlowMod o : flows.values()) {
            if ((o.getCookie().getValue() & mask) == (c & mask)
                && (anyTable || o.getTableId().equals(fm.getTableId()))
                && (anyMatch || o.getMatch().equals(fm.getMatch()))) {
              gone.add(o);
            }
          }
          for (OFFlowMod old : gone) {
            flows.remove(old.getCookie().getValue());
            if (old.getFlags()
                .contains(org.projectfloodlight.openflow.protocol.OFFlowModFlags.SEND_FLOW_REM)) {
              write(
                  s,
                  F.buildFlowRemoved()
                      .setCookie(old.getCookie())
                      .setPriority(old.getPriority())
                      .setTableId(old.getTableId())
                      .setMatch(old.getMatch())
                      .setReason(org.projectfloodlight.openflow.protocol.OFFlowRemovedReason.DELETE)
                      .setPacketCount(U64.of(10))
                      .setByteCount(U64.of(1000))
                      .build());
            }
          }
        }
      }
      case STATS_REQUEST -> {
        switch (((org.projectfloodlight.openflow.protocol.OFStatsRequest<?>) m).getStatsType()) {
          case PORT_DESC -> {
            List<OFPortDesc> ds = new ArrayList<>();
            for (int p : ports) {
              ds.add(
                  F.buildPortDesc()
                      .setPortNo(OFPort.of(p))
                      .setName("p" + p)
                      .setHwAddr(MacAddress.of(0x020000000000L + p))
                      .build());
            }
            write(s, F.buildPortDescStatsReply().setXid(m.getXid()).setEntries(ds).build());
          }
          case GROUP_DESC -> {
            List<OFGroupDescStatsEntry> es = new ArrayList<>();
            for (OFGroupMod g : groups.values()) {
              es.add(
                  F.buildGroupDescStatsEntry()
                      .setGroup(g.getGroup())
                      .setGroupType(g.getGroupType())
                      .setBuckets(g.getBuckets())
                      .build());
            }
            write(s, F.buildGroupDescStatsReply().setXid(m.getXid()).setEntries(es).build());
          }
          case TABLE -> {
            List<org.projectfloodlight.openflow.protocol.OFTableStatsEntry> es = new ArrayList<>();
            for (Map.Entry<Integer, long[]> e : new java.util.TreeMap<>(tableStats).entrySet()) {
              es.add(
                  F.buildTableStatsEntry()
                      .setTableId(TableId.of(e.getKey()))
                      .setLookupCount(U64.of(e.getValue()[0]))
                      .setMatchedCount(U64.of(e.getValue()[1]))
                      .build());
            }
            write(s, F.buildTableStatsReply().setXid(m.getXid()).setEntries(es).build());
          }
          case FLOW -> {
            List<OFFlowStatsEntry> es = new ArrayList<>();
            for (OFFlowMod fm : flows.values()) {
              es.add(
                  F.buildFlowStatsEntry()
                      .setTableId(fm.getTableId())
                      .setPriority(fm.getPriority())
                      .setMatch(fm.getMatch())
                      .setCookie(fm.getCookie())
                      .setInstructions(fm.getInstructions())
                      .setPacketCount(U64.of(10))
                      .setByteCount(U64.of(1000))
                      .build());
            }
            write(s, F.buildFlowStatsReply().setXid(m.getXid()).setEntries(es).build());
          }
          default ->
              write(
                  s,
                  F.errorMsgs()
                      .buildBadRequestErrorMsg()
                      .setXid(m.getXid())
                      .setCode(org.projectfloodlight.openflow.protocol.OFBadRequestCode.BAD_STAT)
                      .build());
        }
      }
      default -> {}
    }
  }

  /**
   * Adds a flow of someone else's (an operator's, or a previous OneSwitch's): table {@code table},
   * priority {@code prio}, matching {@code in_port=inPort} (null: any), applying {@code acts}.
   */
  OFFlowMod addForeign(long cookie, int table, int prio, Integer inPort, List<OFAction> acts) {
    var m = F.buildMatch();
    if (inPort != null) {
      m.setExact(MatchField.IN_PORT, OFPort.of(inPort));
    }
    OFFlowMod fm =
        F.buildFlowAdd()
            .setCookie(U64.of(cookie))
            .setTableId(TableId.of(table))
            .setPriority(prio)
            .setMatch(m.build())
            .setInstructions(List.of(F.instructions().applyActions(acts)))
            .build();
    flows.put(cookie, fm);
    return fm;
  }

  /** Adds a group of someone else's: type ALL, one bucket outputting to {@code port}. */
  OFGroupMod addForeignGroup(int id, int port) {
    OFGroupMod gm =
        F.buildGroupAdd()
            .setGroup(OFGroup.of(id))
            .setGroupType(OFGroupType.ALL)
            .setBuckets(
                List.of(
                    F.buildBucket()
                        .setWatchGroup(OFGroup.ANY)
                        .setWatchPort(OFPort.ANY)
                        .setActions(List.of(F.actions().output(OFPort.of(port), 0xffff)))
                        .build()))
            .build();
    groups.put(id, gm);
    return gm;
  }

  /** Adds a flow the way a previous controller would have left it. */
  void addStale(long cookie) {
    flows.put(
        cookie,
        F.buildFlowAdd()
            .setCookie(U64.of(cookie))
            .setPriority(5)
            .setMatch(F.buildMatch().build())
            .build());
  }

  @Override
  public void close() throws IOException {
    server.close();
    disconnect();
    if (unixPath != null) {
      Files.deleteIfExists(unixPath);
    }
  }
}
