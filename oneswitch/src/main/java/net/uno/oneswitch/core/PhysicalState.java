package net.uno.oneswitch.core;

import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.GroupLabels;
import net.uno.oneswitch.translate.Translator;
import net.uno.oneswitch.translate.WriteActionSet;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What OneSwitch believes is installed on each physical switch, and the planner that turns a
 * desired state into ordered OpenFlow messages. Every physical flow gets a unique cookie, so it is
 * modified/deleted by cookie alone (independent of how the switch normalises matches).
 *
 * <p>Cookies: top byte {@link #COOKIE_MARKER} (OneSwitch's, in every run: {@link #owned}), then 24
 * random bits per process (a previous run's cookies never collide with this one's), then a 32-bit
 * counter. On a shared switch (an operator's) the groups OneSwitch does not own are kept apart
 * ({@link #foreignGroups}): never planned, so never modified or deleted.
 */
public final class PhysicalState {
  private static final Logger LOG = LoggerFactory.getLogger(PhysicalState.class);

  /** The top byte of every cookie OneSwitch gives a physical flow. */
  public static final int COOKIE_MARKER = 0x55;

  static final OFFactory F = factory();

  private static OFFactory factory() {
    return org.projectfloodlight.openflow.protocol.OFFactories.getFactory(
        org.projectfloodlight.openflow.protocol.OFVersion.OF_13);
  }

  /** An installed physical flow: the rule, its cookie, its owner (null = dispatch). */
  public record Installed(PhysRule rule, long cookie, VirtualRule.Key owner) {}

  /** One message for one switch. */
  public record Op(String sw, OFMessage msg) {}

  /**
   * Ordered phases: make (new groups, new flows), unhand (the handoff rules dropped), modify
   * (groups, re-point, new handoff rules), break (delete).
   */
  public static final class Plan {
    /**
     * OneSwitch's scale-out SELECT groups to add: a phase of their own before {@link #make}, so
     * their selection method is set (south/SelectMethod, after the barrier) before any flow sends
     * to them.
     */
    public final List<Op> groups = new ArrayList<>();

    public final List<Op> make = new ArrayList<>();
    public final List<Op> unhand = new ArrayList<>();
    public final List<Op> modify = new ArrayList<>();
    public final List<Op> remove = new ArrayList<>();

    /** Installed flows deleted by this plan (cookie -> owner), for counter accounting. */
    public final List<Installed> deleted = new ArrayList<>();

    /**
     * Switches whose modify messages go first, each in a barriered stage of its own in this order,
     * before the rest's (a table move: its new place, then the host, which relays between sNICs):
     * re-pointed from the destination back, each hop points to one already re-pointed, so no packet
     * is sent back and forth between an old and a new hop.
     */
    public List<String> modifyFirst = List.of();

    /**
     * The switches that take a moved table over (null: every switch). Only their dropped handoff
     * rules go before the modify phase (the table now runs there); another switch's (one that
     * handed on packets it received by a handoff) may still carry packets sent the old way, so it
     * goes in the break phase, after the drain.
     */
    public Set<String> takeOver;

    /** The physical table of the moved table (-1: none); see {@link #takeOver}. */
    public int movedTable = -1;

    /**
     * How long a barriered plan waits after each phase that sent something, before the next (a
     * table move's; 0: not at all). OVS answers a barrier before its revalidators brought the
     * datapath's cached megaflows up to the new rules, so for a moment the switch still forwards by
     * the old ones; the phases' order holds only once each phase is in force in the datapath.
     */
    public long settleMs;

    /**
     * Dispatch rules in {@link #modify} that stop running handed-off packets here (they took them
     * into this switch's copy of a table, and now send them on). In a table move they go in the
     * break phase, ahead of the deletions: until then this switch keeps its old copies, and a
     * packet handed to it the old way (by another switch's cached datapath flow, or still crossing
     * the link after that switch's barrier) still runs here. Sent on, it could reach a place with
     * no rule for its origin: the table's new place, when the packet came from there.
     */
    final Set<Op> stopsHere = new HashSet<>();

    private boolean deferred(Op op) {
      return movedTable >= 0 && stopsHere.contains(op);
    }

    /** The physical table of each dropped handoff rule in {@link #unhand}. */
    final Map<Op, Integer> unhandTable = new HashMap<>();

    /** A key of {@link #unhandTable}: a replica a split replaces, always before modify. */
    static final int ANY_TABLE = -2;

    private boolean now(Op op) {
      int t = unhandTable.getOrDefault(op, -1);
      return t == ANY_TABLE
          || (movedTable < 0 || t == movedTable)
              && (takeOver == null || takeOver.contains(op.sw()));
    }

    /** The unhand phase: the dropped handoff rules of the switches in {@link #takeOver}. */
    public List<Op> unhandNow() {
      return unhand.stream().filter(this::now).toList();
    }

    /**
     * The break phase: in a table move the dispatch that stops running handed-off packets ({@link
     * #stopsHere}), then the other dropped handoff rules and {@link #remove}.
     */
    public List<Op> breakOps() {
      List<Op> out = new ArrayList<>(modify.stream().filter(this::deferred).toList());
      unhand.stream().filter(op -> !now(op)).forEach(out::add);
      out.addAll(remove);
      return out;
    }

    /**
     * The modify phase in its stages ({@link #modifyFirst}, then the rest); empty ones left out.
     * Within a stage the new (handoff) flows come first: a switch's re-pointed dispatch may lead
     * packets into a table whose new handoff it also gets, never the reverse.
     */
    public List<List<Op>> modifyStages() {
      List<List<Op>> out = new ArrayList<>();
      List<Op> rest = new ArrayList<>();
      modify.stream().filter(op -> op.msg() instanceof OFFlowAdd).forEach(rest::add);
      modify.stream()
          .filter(op -> !(op.msg() instanceof OFFlowAdd) && !deferred(op))
          .forEach(rest::add);
      for (String sw : modifyFirst) {
        List<Op> stage = new ArrayList<>();
        rest.removeIf(op -> op.sw().equals(sw) && stage.add(op));
        if (!stage.isEmpty()) {
          out.add(stage);
        }
      }
      if (!rest.isEmpty()) {
        out.add(rest);
      }
      return out;
    }

    public int size() {
      return groups.size() + make.size() + unhand.size() + modify.size() + remove.size();
    }
  }

  private final Map<String, Map<PhysRule.Key, Installed>> flows = new HashMap<>();
  private final Map<Long, Installed> byCookie = new HashMap<>();
  private final Map<String, Map<Integer, GroupSpec>> groups = new HashMap<>();

  /**
   * Per shared switch: the ids of the groups it held when it (re)connected that are not OneSwitch's
   * (see {@link #adopt}); forgotten with the switch.
   */
  private final Map<String, Set<Integer>> foreign = new HashMap<>();

  /**
   * Per switch: the group ids this process has added there and not deleted since (kept across a
   * reconnect: how a shared switch's groups are told OneSwitch's).
   */
  private final Map<String, Set<Integer>> made = new HashMap<>();

  /** (switch, group id) pairs whose collision with a foreign group was logged. */
  private final Set<String> collisionsLogged = new HashSet<>();

  private final long cookieBase;
  private long cookieNext = 1;

  public PhysicalState() {
    this(new SecureRandom().nextInt());
  }

  /** {@code seed}: its low 24 bits go into every cookie (per process, below the marker). */
  public PhysicalState(long seed) {
    this.cookieBase = ((long) COOKIE_MARKER << 56) | ((seed & 0xffffffL) << 32);
  }

  /**
   * True if {@code cookie} is one OneSwitch gives its physical flows, in this run or any other (its
   * top byte is {@link #COOKIE_MARKER}).
   */
  public static boolean owned(long cookie) {
    return (cookie >>> 56) == COOKIE_MARKER;
  }

  /**
   * True if group {@code id} is one of OneSwitch's own ids in every run: the ranges reserved for it
   * (scale-out SELECT groups, carrier groups, label variants), which a controller cannot use.
   * Controller group ids are installed as they are, so such a group is OneSwitch's only if this
   * process added it ({@link #adopt}).
   */
  public static boolean reservedGroup(int id) {
    return Translator.isScaleGroup(id)
        || WriteActionSet.isCarrierGroup(id)
        || GroupLabels.isVariant(id);
  }

  public Map<PhysRule.Key, Installed> flows(String sw) {
    return flows.computeIfAbsent(sw, k -> new HashMap<>());
  }

  public Map<Integer, GroupSpec> groups(String sw) {
    return groups.computeIfAbsent(sw, k -> new TreeMap<>());
  }

  public Installed byCookie(long cookie) {
    return byCookie.get(cookie);
  }

  public int flowCount() {
    return byCookie.size();
  }

  /**
   * Forgets everything about a switch (it disconnected; reconcile reinstalls), except which groups
   * this process added there.
   */
  public void forget(String sw) {
    Map<PhysRule.Key, Installed> m = flows.remove(sw);
    if (m != null) {
      m.values().forEach(i -> byCookie.remove(i.cookie()));
    }
    groups.remove(sw);
    foreign.remove(sw);
    collisionsLogged.removeIf(k -> k.startsWith(sw + "/"));
  }

  /**
   * Takes in the groups switch {@code sw} holds after it (re)connected ({@code dumped}, by id). On
   * a switch of OneSwitch's every group is taken as held (the plan deletes those not wanted). On a
   * {@code shared} one only OneSwitch's: a {@link #reservedGroup} id, or one this process added
   * there; every other group is the operator's (or of an earlier run of OneSwitch: not told apart)
   * and is left out of every plan, never modified or deleted. Returns the foreign ids.
   */
  public Set<Integer> adopt(String sw, Map<Integer, GroupSpec> dumped, boolean shared) {
    Map<Integer, GroupSpec> have = groups(sw);
    Set<Integer> out = new TreeSet<>();
    Set<Integer> mine = made.getOrDefault(sw, Set.of());
    for (Map.Entry<Integer, GroupSpec> e : dumped.entrySet()) {
      int id = e.getKey();
      if (!shared || reservedGroup(id) || mine.contains(id)) {
        have.put(id, e.getValue());
      } else {
        out.add(id);
      }
    }
    foreign.put(sw, out);
    return Collections.unmodifiableSet(out);
  }

  /** The ids of the groups on {@code sw} that are not OneSwitch's (a shared switch; see adopt). */
  public Set<Integer> foreignGroups(String sw) {
    return Collections.unmodifiableSet(foreign.getOrDefault(sw, Set.of()));
  }

  /** The cookie the next installed flow will get (see {@link #issuedSince}). */
  public long cookieMark() {
    return cookieBase | (cookieNext & 0xffffffffL);
  }

  /**
   * True if this process issued {@code cookie} at or after {@code mark} (a {@link #cookieMark}).
   */
  public boolean issuedSince(long cookie, long mark) {
    return (cookie & 0xffffffff00000000L) == cookieBase
        && (cookie & 0xffffffffL) >= (mark & 0xffffffffL);
  }

  private long newCookie() {
    return cookieBase | (cookieNext++ & 0xffffffffL);
  }

  /**
   * Plans the changes that bring keys {@code dirty} to {@code desired} on switches in {@code live};
   * {@code readd} keys are re-added (fresh counters) even when unchanged. Updates the installed
   * state as planned.
   */
  public Plan plan(
      Map<PhysRule.Key, PhysRule> desired,
      Map<PhysRule.Key, VirtualRule.Key> owners,
      Iterable<PhysRule.Key> dirty,
      Set<PhysRule.Key> readd,
      Map<String, Map<Integer, GroupSpec>> desiredGroups,
      Set<String> live) {
    Plan p = new Plan();
    List<Op> groupModifies = new ArrayList<>();
    for (String sw : live) {
      Map<Integer, GroupSpec> want = desiredGroups.getOrDefault(sw, Map.of());
      Set<Integer> theirs = foreign.getOrDefault(sw, Set.of());
      if (!theirs.isEmpty()) {
        want = new TreeMap<>(want);
        for (Integer g : theirs) {
          if (want.remove(g) != null && collisionsLogged.add(sw + "/" + g)) {
            LOG.warn(
                "switch {} (shared): group {} is there and not OneSwitch's: left as it is,"
                    + " not installed (OneSwitch's rules using group {} use that one)",
                sw,
                Integer.toUnsignedString(g),
                Integer.toUnsignedString(g));
          }
        }
      }
      Map<Integer, GroupSpec> have = groups(sw);
      Set<Integer> mine = made.computeIfAbsent(sw, k -> new HashSet<>());
      for (Map.Entry<Integer, GroupSpec> e : want.entrySet()) {
        GroupSpec h = have.get(e.getKey());
        if (h == null) {
          boolean scale =
              e.getValue().type() == org.projectfloodlight.openflow.protocol.OFGroupType.SELECT
                  && net.uno.oneswitch.translate.Translator.isScaleGroup(e.getKey());
          (scale ? p.groups : p.make).add(new Op(sw, groupAdd(e.getKey(), e.getValue())));
          mine.add(e.getKey());
        } else if (!h.equals(e.getValue())) {
          // In the modify phase, with the flows re-pointed: new buckets may send to tag-delivery
          // rules of other switches that the make phase installs.
          groupModifies.add(new Op(sw, groupModify(e.getKey(), e.getValue())));
        }
      }
      for (Integer g : have.keySet()) {
        if (!want.containsKey(g)) {
          p.remove.add(new Op(sw, groupDelete(g)));
          mine.remove(g);
        }
      }
      have.clear();
      have.putAll(want);
    }
    List<Op> groupDeletes = new ArrayList<>(p.remove);
    p.remove.clear();
    p.modify.addAll(groupModifies);
    java.util.Set<PhysRule.Key> seen = new java.util.HashSet<>();
    Resplits resplits = new Resplits();
    for (PhysRule.Key k : dirty) {
      if (!seen.add(k) || !live.contains(k.sw())) {
        continue;
      }
      PhysRule want = desired.get(k);
      Map<PhysRule.Key, Installed> have = flows(k.sw());
      Installed cur = have.get(k);
      VirtualRule.Key owner = owners.get(k);
      if (want != null && (cur == null || readd.contains(k))) {
        if (cur != null) {
          byCookie.remove(cur.cookie());
        }
        Installed n = new Installed(want, newCookie(), owner);
        have.put(k, n);
        byCookie.put(n.cookie(), n);
        // A new handoff rule waits for the make phase (the rules it hands packets to) to be
        // barriered.
        Op op = new Op(k.sw(), flowAdd(n));
        (want.isLate() && cur == null ? p.modify : p.make).add(op);
        if (cur == null && !want.isLate()) {
          resplits.added(want, owner, op);
        }
      } else if (want != null) {
        if (!Objects.equals(want.instructions(), cur.rule().instructions())
            || !Objects.equals(owner, cur.owner())) {
          Installed n = new Installed(want, cur.cookie(), owner);
          have.put(k, n);
          byCookie.put(n.cookie(), n);
          if (!Objects.equals(want.instructions(), cur.rule().instructions())) {
            Op op = new Op(k.sw(), flowModify(n));
            p.modify.add(op);
            if (owner == null && !want.isLate() && runsHere(cur.rule()) && !runsHere(want)) {
              p.stopsHere.add(op);
            }
          }
        }
      } else if (cur != null) {
        have.remove(k);
        byCookie.remove(cur.cookie());
        p.deleted.add(cur);
        // A handoff rule goes before the modify phase, not after the drain: where it is removed,
        // the table it handed off to now runs here (installed in the make phase). Kept while the
        // table's old place gets its new handoff to here, it could hand packets back there (a
        // loop: both are priority 0, tied with a table-miss rule), so the modify phase waits for
        // its barrier.
        Op op = new Op(k.sw(), flowDelete(cur.cookie()));
        (cur.rule().isLate() ? p.unhand : p.remove).add(op);
        if (cur.rule().isLate()) {
          p.unhandTable.put(op, cur.rule().table());
        }
        if (!cur.rule().isLate()) {
          resplits.deleted(cur.rule(), cur.owner(), op);
        }
      }
    }
    resplits.order(p);
    p.remove.addAll(groupDeletes);
    return p;
  }

  /** True if {@code r} sends its packets on into a table of its own switch (a goto_table). */
  private static boolean runsHere(PhysRule r) {
    return r.instructions().stream()
        .anyMatch(
            i ->
                i
                    instanceof
                    org.projectfloodlight.openflow.protocol.instruction.OFInstructionGotoTable);
  }

  /**
   * A virtual rule whose replicas on a switch are split or merged in one plan (a table there starts
   * or stops running handed-off packets: one rule becomes a local part plus a copy per source, or
   * back). The old and new replicas have the same priority and overlap, so while both are there the
   * switch picks either; the unsplit one sends a handed-off packet's output back out its PCIe
   * in_port, which the switch drops. So the unsplit replica is never beside a split one while
   * handed-off packets arrive: on a split it goes before the modify phase (which starts the
   * handoffs here), on a merge it comes in the break phase (after the drain), ahead of the
   * deletions on its switch.
   */
  private static final class Resplits {
    private record Site(String sw, int table, int priority, VirtualRule.Key owner) {}

    private final Map<Site, List<Op>> plainAdds = new HashMap<>();
    private final Map<Site, List<Op>> plainDeletes = new HashMap<>();
    private final Set<Site> handedAdds = new HashSet<>();
    private final Set<Site> handedDeletes = new HashSet<>();

    private static Site site(PhysRule r, VirtualRule.Key owner) {
      return new Site(r.sw(), r.table(), r.priority(), owner);
    }

    private static boolean handed(PhysRule r) {
      return r.match().isExact(org.projectfloodlight.openflow.protocol.match.MatchField.TUNNEL_ID);
    }

    void added(PhysRule r, VirtualRule.Key owner, Op op) {
      if (owner == null) {
        return;
      }
      Site s = site(r, owner);
      if (handed(r)) {
        handedAdds.add(s);
      } else {
        plainAdds.computeIfAbsent(s, k -> new ArrayList<>()).add(op);
      }
    }

    void deleted(PhysRule r, VirtualRule.Key owner, Op op) {
      if (owner == null) {
        return;
      }
      Site s = site(r, owner);
      if (handed(r)) {
        handedDeletes.add(s);
      } else {
        plainDeletes.computeIfAbsent(s, k -> new ArrayList<>()).add(op);
      }
    }

    void order(Plan p) {
      List<Op> early = new ArrayList<>();
      for (Map.Entry<Site, List<Op>> e : plainDeletes.entrySet()) {
        if (handedAdds.contains(e.getKey()) && !handedDeletes.contains(e.getKey())) {
          early.addAll(e.getValue());
        }
      }
      List<Op> late = new ArrayList<>();
      for (Map.Entry<Site, List<Op>> e : plainAdds.entrySet()) {
        if (handedDeletes.contains(e.getKey()) && !handedAdds.contains(e.getKey())) {
          late.addAll(e.getValue());
        }
      }
      Set<Op> moved = new HashSet<>(early);
      moved.addAll(late);
      p.remove.removeIf(moved::contains);
      p.make.removeIf(moved::contains);
      p.unhand.addAll(early);
      early.forEach(op -> p.unhandTable.put(op, Plan.ANY_TABLE));
      p.remove.addAll(0, late);
    }
  }

  static OFMessage flowAdd(Installed i) {
    PhysRule r = i.rule();
    return F.buildFlowAdd()
        .setTableId(TableId.of(r.table()))
        .setPriority(r.priority())
        .setMatch(r.match())
        .setInstructions(r.instructions())
        .setCookie(U64.of(i.cookie()))
        .setBufferId(OFBufferId.NO_BUFFER)
        .setOutPort(OFPort.ANY)
        .setOutGroup(OFGroup.ANY)
        // A handoff rule (late, no owner) reports its final packets too: TABLE statistics.
        .setFlags(
            i.owner() == null && !r.isLate() ? Set.of() : Set.of(OFFlowModFlags.SEND_FLOW_REM))
        .build();
  }

  /**
   * Re-points one installed flow in place. Strict, with the flow's own priority and match (plus its
   * cookie): OVS checks the new actions against the flow_mod's match, so an empty match would make
   * it refuse e.g. pop_vlan (MATCH_INCONSISTENT) although the installed flow matches a VLAN.
   */
  static OFMessage flowModify(Installed i) {
    return F.buildFlowModifyStrict()
        .setTableId(TableId.of(i.rule().table()))
        .setPriority(i.rule().priority())
        .setMatch(i.rule().match())
        .setCookie(U64.of(i.cookie()))
        .setCookieMask(U64.NO_MASK)
        .setInstructions(i.rule().instructions())
        .setOutPort(OFPort.ANY)
        .setOutGroup(OFGroup.ANY)
        .setBufferId(OFBufferId.NO_BUFFER)
        .build();
  }

  public static OFMessage flowDelete(long cookie) {
    return F.buildFlowDelete()
        .setTableId(TableId.ALL)
        .setMatch(F.buildMatch().build())
        .setCookie(U64.of(cookie))
        .setCookieMask(U64.NO_MASK)
        .setOutPort(OFPort.ANY)
        .setOutGroup(OFGroup.ANY)
        .build();
  }

  static OFMessage groupAdd(int id, GroupSpec g) {
    return F.buildGroupAdd()
        .setGroup(OFGroup.of(id))
        .setGroupType(g.type())
        .setBuckets(g.buckets())
        .build();
  }

  static OFMessage groupModify(int id, GroupSpec g) {
    return F.buildGroupModify()
        .setGroup(OFGroup.of(id))
        .setGroupType(g.type())
        .setBuckets(g.buckets())
        .build();
  }

  public static OFMessage groupDelete(int id) {
    return F.buildGroupDelete()
        .setGroup(OFGroup.of(id))
        .setGroupType(org.projectfloodlight.openflow.protocol.OFGroupType.ALL)
        .build();
  }

  /**
   * Builds and encodes one of each message a plan sends (WarmUp): loads and links their classes
   * before the first remap needs them.
   */
  static void encodeOneOfEach() {
    Installed i =
        new Installed(new PhysRule("warm-up", 1, 1, F.buildMatch().build(), List.of()), 0, null);
    GroupSpec g = new GroupSpec(org.projectfloodlight.openflow.protocol.OFGroupType.ALL, List.of());
    io.netty.buffer.ByteBuf b = io.netty.buffer.Unpooled.buffer();
    try {
      for (OFMessage m :
          List.of(
              flowAdd(i),
              flowModify(i),
              flowDelete(1),
              groupAdd(1, g),
              groupModify(1, g),
              groupDelete(1),
              F.buildBarrierRequest().setXid(1).build())) {
        m.createBuilder().setXid(1).build().writeTo(b);
      }
    } finally {
      b.release();
    }
  }

  /** Re-adds every installed flow of a switch (after it reconnected). */
  public List<OFMessage> reinstall(String sw) {
    List<OFMessage> out = new ArrayList<>();
    for (Installed i : flows(sw).values()) {
      out.add(flowAdd(i));
    }
    return out;
  }
}
