package net.uno.oneswitch.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.oftable.FakeOfTable;
import net.uno.oneswitch.oftable.Frame;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModCommand;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupModCommand;

/**
 * Translation checked by packets, without a switch or root: the controller's messages go to the
 * core under test and, where it accepts them, to a fake VIRTUAL switch ({@link FakeOfTable} over
 * the vports); the core's translated rules and groups are installed on fake PHYSICAL switches (host
 * and sNICs) wired through the PCIe port pairs. A frame sent into a vport on both must leave by the
 * same vports as the same frames (semantic equivalence), and every virtual rule's packet and byte
 * counters must equal the sum of its replicas'.
 */
final class Equivalence {
  /** A frame's fate: "port: frame" per output, sorted ("CONTROLLER" for a packet-in). */
  record Fate(List<String> outputs) {}

  private final Topology topo;
  private final Callable<OneSwitchCore> coreOf;
  private final Runner on;

  /** The accepted virtual messages, replayed onto a fresh virtual switch at each check. */
  private final List<Consumer<FakeOfTable>> virtualOps = new ArrayList<>();

  private int accepted;
  private final List<String> refused = new ArrayList<>();

  /** The accepted ADDs still installed, by rule. */
  private final Map<VirtualRule.Key, OFFlowMod> installed = new LinkedHashMap<>();

  /** Runs a task on the core's thread. */
  interface Runner {
    <T> T on(Callable<T> c) throws Exception;
  }

  Equivalence(Topology topo, Runner on, Callable<OneSwitchCore> core) {
    this.topo = topo;
    this.on = on;
    this.coreOf = core;
  }

  /** How many ADDs the core accepted. */
  int accepted() {
    return accepted;
  }

  List<String> refused() {
    return refused;
  }

  /**
   * Sends a FLOW_MOD (ADD or DELETE_STRICT) to the core and, if accepted, to the virtual switch.
   */
  boolean flowMod(OFFlowMod fm) throws Exception {
    if (!coreAccepts(core -> core.flowMods().flowMod(fm))) {
      return false;
    }
    int table = fm.getTableId().getValue();
    if (fm.getCommand() == OFFlowModCommand.ADD) {
      accepted++;
      VirtualRule.Key key = VirtualRule.of(fm, table, 0).key();
      installed.put(key, fm);
      virtualOps.add(
          t -> t.addFlow(table, fm.getPriority(), fm.getMatch(), fm.getInstructions(), key));
    } else if (fm.getCommand() == OFFlowModCommand.DELETE_STRICT) {
      installed.remove(VirtualRule.of(fm, table, 0).key());
      virtualOps.add(t -> t.deleteStrict(table, fm.getPriority(), fm.getMatch()));
    } else {
      throw new UnsupportedOperationException("flow-mod " + fm.getCommand());
    }
    return true;
  }

  /** Sends a GROUP_MOD (ADD or MODIFY) to the core and, if accepted, to the virtual switch. */
  boolean groupMod(OFGroupMod gm) throws Exception {
    if (!coreAccepts(core -> core.groupMods().groupMod(gm))) {
      return false;
    }
    if (gm.getCommand() != OFGroupModCommand.ADD && gm.getCommand() != OFGroupModCommand.MODIFY) {
      throw new UnsupportedOperationException("group-mod " + gm.getCommand());
    }
    int id = gm.getGroup().getGroupNumber();
    virtualOps.add(t -> t.addGroup(id, gm.getGroupType(), gm.getBuckets()));
    return true;
  }

  /** A controller message given to the core, which throws the OpenFlow error if it refuses it. */
  private interface Message {
    void send(OneSwitchCore core) throws OfError;
  }

  /**
   * Gives {@code m} to the core on its thread; false, with the error added to {@link #refused}, if
   * the core refused it.
   */
  private boolean coreAccepts(Message m) throws Exception {
    OneSwitchCore core = coreOf.call();
    OfError err =
        on.on(
            () -> {
              try {
                m.send(core);
                return null;
              } catch (OfError e) {
                return e;
              }
            });
    if (err != null) {
      refused.add(err.typeAndCode() + ": " + err.getMessage());
      return false;
    }
    return true;
  }

  /** The virtual switch and the physical ones as the core stands now. */
  final class Snapshot {
    final PortMap ports;
    final FakeOfTable virtual;
    final Map<String, FakeOfTable> physical = new LinkedHashMap<>();

    /** Each physical flow by its rule's key. */
    private final Map<PhysRule.Key, FakeOfTable.Flow> flowOf = new HashMap<>();

    Snapshot() throws Exception {
      this(null, null);
    }

    /**
     * With the physical flows {@code rules} (owners {@code owners}) instead of the core's (an
     * intermediate state of a plan); null: the core's.
     */
    Snapshot(Map<PhysRule.Key, PhysRule> rules, Map<PhysRule.Key, VirtualRule.Key> owners)
        throws Exception {
      this(rules, owners, FakeOfTable.Tie.THROW);
    }

    /**
     * As above; a physical switch resolves a priority tie between a rule with an owner and one
     * without (a handoff) by {@code tie}.
     */
    Snapshot(
        Map<PhysRule.Key, PhysRule> rules,
        Map<PhysRule.Key, VirtualRule.Key> owners,
        FakeOfTable.Tie tie)
        throws Exception {
      OneSwitchCore core = coreOf.call();
      ports = on.on(() -> core.vswitch().ports());
      Set<Integer> vports = new TreeSet<>();
      ports.all().forEach(v -> vports.add(v.vport()));
      virtual = new FakeOfTable("virtual", vports);
      virtualOps.forEach(op -> op.accept(virtual));
      Map<String, Set<Integer>> swPorts = new HashMap<>();
      for (String sw : topo.switches()) {
        swPorts.put(sw, new TreeSet<>());
      }
      for (Topology.Pcie l : topo.pcie().values()) {
        swPorts.get(topo.host()).add(l.hostPort());
        swPorts.get(l.snic()).add(l.snicPort());
      }
      for (Map.Entry<VPort.Loc, Integer> e : vportOf(ports).entrySet()) {
        swPorts.get(e.getKey().sw()).add(e.getKey().port());
      }
      for (String sw : topo.switches()) {
        FakeOfTable ft = new FakeOfTable(sw, swPorts.get(sw));
        ft.tie(tie);
        physical.put(sw, ft);
      }
      on.on(
          () -> {
            Translations tr = core.planner().translations();
            Map<PhysRule.Key, PhysRule> want = rules != null ? rules : tr.desired();
            Map<PhysRule.Key, VirtualRule.Key> own = owners != null ? owners : tr.owners();
            for (PhysRule p : want.values()) {
              VirtualRule.Key owner = own.get(p.key());
              flowOf.put(
                  p.key(),
                  physical
                      .get(p.sw())
                      .addFlow(p.table(), p.priority(), p.match(), p.instructions(), owner));
            }
            for (Map.Entry<String, Map<Integer, GroupSpec>> e :
                core.planner().desiredGroups().entrySet()) {
              for (Map.Entry<Integer, GroupSpec> g : e.getValue().entrySet()) {
                physical
                    .get(e.getKey())
                    .addGroup(g.getKey(), g.getValue().type(), g.getValue().buckets());
              }
            }
            return null;
          });
    }

    /** The frame's fate on the virtual switch, sent in by vport {@code vport}. */
    Fate virtual(int vport, Frame fr) {
      return new Fate(FakeOfTable.canonical(virtual.process(fr, vport)));
    }

    /** The frame's fate on the physical switches, sent in by physical port {@code in}. */
    Fate physical(VPort.Loc in, Frame fr) {
      Map<VPort.Loc, Integer> vp = vportOf(ports);
      List<FakeOfTable.Output> out = new ArrayList<>();
      walk(in, fr, vp, out, 0);
      return new Fate(FakeOfTable.canonical(out));
    }

    /**
     * Sends {@code fr} into vport {@code vport} with the first switch it meets holding this
     * snapshot's flows and every switch it is handed on to holding {@code later}'s (a packet
     * forwarded the old way that arrives after its next hop changed: still crossing the link, or
     * sent by a switch's cached datapath flow after its barrier), and asserts the virtual switch's
     * fate. Into its own state ({@code later} this snapshot): the frame's whole path in this state,
     * counted.
     */
    void sameInFlight(Snapshot later, int vport, Frame fr) {
      Map<VPort.Loc, Integer> vp = vportOf(ports);
      for (VPort.Loc in : ports.get(vport).orElseThrow().instances()) {
        Fate want = virtual(vport, fr); // once per instance: the counters compare too
        List<FakeOfTable.Output> out = new ArrayList<>();
        walk(in, fr, vp, out, 0, later);
        String where = "frame " + fr + " into vport " + vport + " at " + in;
        assertEquals(
            want.outputs(),
            new Fate(FakeOfTable.canonical(out)).outputs(),
            later == this
                ? where
                    + "\nvirtual rules:\n"
                    + describe(virtual)
                    + "\nphysical:\n"
                    + describePhysical()
                : where
                    + ", handed on into the later state\nphysical before:\n"
                    + describePhysical()
                    + "\nphysical later:\n"
                    + later.describePhysical());
      }
    }

    private void walk(
        VPort.Loc in,
        Frame fr,
        Map<VPort.Loc, Integer> vp,
        List<FakeOfTable.Output> out,
        int hops) {
      walk(in, fr, vp, out, hops, this);
    }

    /** As above, the switches after the first hop holding {@code next}'s flows. */
    private void walk(
        VPort.Loc in,
        Frame fr,
        Map<VPort.Loc, Integer> vp,
        List<FakeOfTable.Output> out,
        int hops,
        Snapshot next) {
      if (hops > 8) {
        throw new IllegalStateException("frame loops over PCIe: " + fr);
      }
      for (FakeOfTable.Output o : physical.get(in.sw()).process(fr, in.port())) {
        VPort.Loc at = new VPort.Loc(in.sw(), o.port());
        VPort.Loc peer = peer(at);
        if (o.port() == FakeOfTable.CONTROLLER) {
          out.add(o);
        } else if (peer != null) {
          next.walk(peer, o.frame(), vp, out, hops + 1, next);
        } else if (vp.containsKey(at)) {
          out.add(new FakeOfTable.Output(vp.get(at), o.frame()));
        } else {
          out.add(new FakeOfTable.Output(-1000 - o.port(), o.frame())); // an unmapped port
        }
      }
    }

    /**
     * Sends {@code fr} into vport {@code vport} on both (physically through each of its instances)
     * and asserts the same fate.
     */
    void same(int vport, Frame fr) {
      sameInFlight(this, vport, fr);
    }

    /**
     * Sends every frame into every vport, each as {@link #sameInFlight} into {@code later} (this
     * snapshot: the whole path here).
     */
    void sendAll(Snapshot later, List<Frame> frames) {
      Set<Integer> vports = new TreeSet<>();
      ports.all().forEach(v -> vports.add(v.vport()));
      for (Frame fr : frames) {
        for (int v : vports) {
          sameInFlight(later, v, fr);
        }
      }
    }

    /**
     * Asserts that each virtual rule counted what its replicas counted together; returns how many
     * virtual rules saw a packet.
     */
    int sameCounters() {
      Map<Object, long[]> phys = new HashMap<>();
      for (FakeOfTable t : physical.values()) {
        for (FakeOfTable.Flow f : t.flows()) {
          if (f.owner() != null) {
            long[] c = phys.computeIfAbsent(f.owner(), k -> new long[2]);
            c[0] += f.packets();
            c[1] += f.bytes();
          }
        }
      }
      int hit = 0;
      for (FakeOfTable.Flow f : virtual.flows()) {
        long[] c = phys.getOrDefault(f.owner(), new long[2]);
        assertEquals(f.packets(), c[0], "packets of " + f);
        assertEquals(f.bytes(), c[1], "bytes of " + f);
        if (f.packets() > 0) {
          exercised.add((VirtualRule.Key) f.owner());
        }
      }
      return exercised.size();
    }

    /**
     * Asserts that each virtual table's TABLE statistics (lookups, matches) are what the core
     * merges from the physical tables' ({@link TableCounts}, the live handoff rules' packets taken
     * out): each packet counted once per virtual table it went through. For the core's own rules
     * only (the handoff rules are the core's).
     */
    void sameTableCounters() throws Exception {
      OneSwitchCore core = coreOf.call();
      Map<Integer, long[]> phys = new HashMap<>();
      for (FakeOfTable t : physical.values()) {
        for (int pt = 1; pt <= core.virtualTables(); pt++) {
          long[] c = t.tableCounts(pt);
          long[] a = phys.computeIfAbsent(pt, k -> new long[2]);
          a[0] += c[0];
          a[1] += c[1];
        }
      }
      Map<Integer, Long> handoff =
          on.on(
              () ->
                  core.counters()
                      .handoffPackets(
                          p -> {
                            FakeOfTable.Flow f = flowOf.get(p.key());
                            return f == null ? null : new long[] {f.packets(), f.bytes()};
                          }));
      for (int t = 0; t < core.virtualTables(); t++) {
        long[] want = virtual.tableCounts(t);
        long[] got = TableCounts.of(t, phys, handoff);
        assertEquals(want[0], got[0], "lookups of table " + t);
        assertEquals(want[1], got[1], "matches of table " + t);
      }
    }

    /** The virtual rules the last {@link #sameCounters} saw a packet in. */
    final List<VirtualRule.Key> exercised = new ArrayList<>();

    private VPort.Loc peer(VPort.Loc at) {
      for (Topology.Pcie l : topo.pcie().values()) {
        if (at.sw().equals(topo.host()) && at.port() == l.hostPort()) {
          return new VPort.Loc(l.snic(), l.snicPort());
        }
        if (at.sw().equals(l.snic()) && at.port() == l.snicPort()) {
          return new VPort.Loc(topo.host(), l.hostPort());
        }
      }
      return null;
    }

    String describePhysical() {
      StringBuilder b = new StringBuilder();
      physical.values().forEach(t -> b.append(t.name()).append(":\n").append(describe(t)));
      return b.toString();
    }
  }

  private static String describe(FakeOfTable t) {
    StringBuilder b = new StringBuilder();
    t.flows().forEach(f -> b.append("  ").append(f).append('\n'));
    return b.toString();
  }

  /** Each physical port that stands for a vport: its instances, draining and prepared ports. */
  static Map<VPort.Loc, Integer> vportOf(PortMap pm) {
    Map<VPort.Loc, Integer> out = new HashMap<>();
    for (VPort v : pm.all()) {
      v.instances().forEach(l -> out.put(l, v.vport()));
    }
    for (Drain d : pm.drains()) {
      out.putIfAbsent(d.loc(), d.vport());
    }
    return out;
  }

  /**
   * Sends every frame into every vport on both and asserts equal fates and counters; returns how
   * many virtual rules saw a packet.
   */
  int check(List<Frame> frames) throws Exception {
    Snapshot s = sentToAll(frames);
    s.sameTableCounters();
    return s.sameCounters();
  }

  /**
   * A snapshot of the core as it stands, with every frame sent into every vport on both and equal
   * fates asserted (the counters are left to compare).
   */
  private Snapshot sentToAll(List<Frame> frames) throws Exception {
    Snapshot s = new Snapshot();
    s.sendAll(s, frames);
    return s;
  }

  /**
   * Sends every frame into every vport on the virtual switch and on physical switches holding
   * {@code rules} (owners {@code owners}), asserting equal fates and counters; returns how many
   * virtual rules saw a packet.
   */
  int checkState(
      Map<PhysRule.Key, PhysRule> rules,
      Map<PhysRule.Key, VirtualRule.Key> owners,
      List<Frame> frames)
      throws Exception {
    return checkState(rules, owners, frames, FakeOfTable.Tie.THROW);
  }

  /** As above, the physical switches resolving a tie of a rule and a handoff by {@code tie}. */
  int checkState(
      Map<PhysRule.Key, PhysRule> rules,
      Map<PhysRule.Key, VirtualRule.Key> owners,
      List<Frame> frames,
      FakeOfTable.Tie tie)
      throws Exception {
    Snapshot s = new Snapshot(rules, owners, tie);
    s.sendAll(s, frames);
    return s.sameCounters();
  }

  /**
   * Sends every frame into every vport with the first switch in state {@code from} and the switches
   * it is handed on to in state {@code to} (a move's in-flight packets, {@link
   * Snapshot#sameInFlight}), asserting the virtual switch's fates.
   */
  void checkInFlight(
      Map<PhysRule.Key, PhysRule> from,
      Map<PhysRule.Key, PhysRule> to,
      Map<PhysRule.Key, VirtualRule.Key> owners,
      List<Frame> frames,
      FakeOfTable.Tie tie)
      throws Exception {
    new Snapshot(from, owners, tie).sendAll(new Snapshot(to, owners, tie), frames);
  }

  /**
   * As {@link #check}, in rounds: after each, the rules the frames exercised are deleted (on both
   * sides, through the core), which uncovers the rules they shadowed, until a round exercises none.
   * Returns how many rules were exercised in all.
   */
  int checkInRounds(List<Frame> frames) throws Exception {
    int total = 0;
    for (int round = 0; round < 20; round++) {
      Snapshot s = sentToAll(frames);
      int hit = s.sameCounters();
      if (hit == 0) {
        break;
      }
      total += hit;
      for (VirtualRule.Key k : s.exercised) {
        OFFlowMod fm = installed.get(k);
        if (fm != null
            && !flowMod(
                org.projectfloodlight.openflow.protocol.OFFactories.getFactory(fm.getVersion())
                    .buildFlowDeleteStrict()
                    .setTableId(fm.getTableId())
                    .setPriority(fm.getPriority())
                    .setMatch(fm.getMatch())
                    .build())) {
          throw new IllegalStateException("delete refused: " + refused);
        }
      }
    }
    return total;
  }

  /**
   * A few frames of each kind the rules tell apart: untagged, tagged, ARP, MPLS, other; QinQ too if
   * {@code wireVlans} is 2 (with 1, a frame does not come in with two VLAN headers: the operator's
   * promise that config {@code wire_vlans} encodes).
   */
  static List<Frame> standardFrames(int wireVlans) {
    List<Frame> out = new ArrayList<>();
    long[] macs = {0x020000000001L, 0x020000000002L, 0x0200000000aaL};
    int[] ips = IPS;
    int i = 0;
    for (long src : macs) {
      for (int dst : ips) {
        Frame udp = Frame.l4(src, macs[(i + 1) % 3], ips[i % 4], dst, 17, 1000 + i, 53 + i % 2);
        Frame tcp = Frame.l4(src, macs[(i + 2) % 3], ips[i % 4], dst, 6, 2000 + i, 80);
        out.add(udp.payload("u" + i));
        out.add(tcp.payload("t" + i));
        out.add(udp.tagged(0x8100, i % 8, 10).payload("v" + i));
        if (wireVlans > 1) {
          out.add(tcp.tagged(0x88a8, 0, 10).tagged(0x8100, 1, 20).payload("q" + i));
        }
        i++;
      }
    }
    out.add(Frame.arp(macs[0], 1, ips[0], ips[1]));
    out.add(Frame.arp(macs[1], 2, ips[1], ips[0]).tagged(0x8100, 0, 10));
    out.add(Frame.eth(macs[2], macs[0], 0x88b5).payload("x"));
    out.add(Frame.eth(macs[2], macs[0], 0x88b5).tagged(0x8100, 0, 10));
    if (wireVlans > 1) {
      out.add(Frame.eth(macs[2], macs[0], 0x88b5).tagged(0x88a8, 0, 10).tagged(0x8100, 0, 30));
    }
    out.add(Frame.l4(macs[0], macs[1], ips[0], ips[1], 17, 5, 6).labelled(500, 9));
    out.add(Frame.icmp(macs[1], macs[0], ips[1], ips[0], 8, 0));
    return out;
  }

  /** The IPv4 addresses of the standard frames (as sources and destinations). */
  static final int[] IPS = {0x0a000001, 0x0a000002, 0x0a000102, 0xc0a80001};

  /** Frames counted by kind (for messages). */
  static Map<String, Integer> kinds(List<Frame> frames) {
    Map<String, Integer> m = new TreeMap<>();
    for (Frame f : frames) {
      m.merge(f.vlans().size() + "vlan/" + Integer.toHexString(f.ethType()), 1, Integer::sum);
    }
    return m;
  }

  static Set<String> unique(List<String> l) {
    return new HashSet<>(l);
  }
}
