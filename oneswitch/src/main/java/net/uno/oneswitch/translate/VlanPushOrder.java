package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionGotoTable;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;

/**
 * How many VLAN headers a frame may carry when it enters each virtual table (pure, incremental),
 * for the flow-id carrier ({@link Carrier.Frame}). OF1.3 matches only the outer header, so a rule
 * cannot tell a QinQ frame from a single-tagged one: a frame that came in tagged and was tagged
 * again by a push in an earlier table reaches a later rule matching one VLAN (or none) with one
 * header more than that rule's match shows, and a VLAN carrier tag would then be a third header
 * (the inner one lost). Frames come in with at most {@code wire} headers (config {@code
 * wire_vlans}): 1 by default (a QinQ frame from a port, at a rule that does not match both its
 * VLANs, is then taken to carry one: a known limit), or 2, where every table starts at depth 2 and
 * an output across PCIe of a tagged-or-unknown frame takes a label or the VLAN id rewrite, or is
 * refused.
 *
 * <p>A rule whose apply-actions may leave more than one header (its match: "no VLAN" = none, else
 * up to its table's depth; then its pushes and pops) and that goes to table g raises the depth of
 * tables g and above (any of them may follow g); without goto_table its frame reaches no other
 * table (OVS keeps at most 2 headers: a push onto two drops the innermost, so depths are 1 or 2). A
 * push in an action set runs only at the end of the pipeline; it is taken, conservatively, to reach
 * every later table. Matches are otherwise ignored (static), and the port map plays no part.
 *
 * <p>When the depths change (a push added or removed), the core re-translates the rules that rely
 * on them ({@link #reliesOnDepth}) in the tables whose depth changed; a push whose re-translations
 * cannot all be carried is refused (core/Planner, core/FlowMods).
 */
public final class VlanPushOrder {
  /** VLAN headers a frame may carry when it comes in, by default. */
  public static final int WIRE = 1;

  /** VLAN headers a frame may carry when it comes in from a port (1 or 2). */
  private final int wire;

  // The rules whose VLAN pushes may reach another table, counted (an identical rule twice is rare).
  private final Map<VirtualRule, Integer> pushers = new HashMap<>();
  // The rules whose apply-actions change a frame's eth_type (MPLS, PBB push/pop), counted.
  private final Map<VirtualRule, Integer> typeChangers = new HashMap<>();
  private Depths depths; // null = to compute

  /** Frames come in with at most one VLAN header ({@link #WIRE}). */
  public VlanPushOrder() {
    this(WIRE);
  }

  /**
   * Frames come in with at most {@code wire} VLAN headers: 1, or 2 (QinQ from the wire; OVS parses
   * no more).
   */
  public VlanPushOrder(int wire) {
    if (wire < 1 || wire > Translator.MAX_VLAN_HEADERS) {
      throw new IllegalArgumentException("wire VLAN headers must be 1 or 2, got " + wire);
    }
    this.wire = wire;
  }

  /** The most VLAN headers a frame may carry when it comes in from a port. */
  public int wire() {
    return wire;
  }

  /**
   * A snapshot of the depths: {@link #at} a table's entry (a step function: from each key of {@code
   * entry} on, its value), and {@link #after} a goto to a table: the most headers a push in that or
   * a later table may leave the frame with when the action set runs, at the end of the pipeline (0
   * if none pushes). {@code wire}: the depth of a table no push reaches. These hold for any frame;
   * {@link #of} gives the (lower or equal) depths of the frames one rule can match: {@code byClass}
   * holds those of each {@link FrameClass} that differ, over the in_ports and eth_types the pushing
   * rules match ({@code inPorts}, {@code ethTypes}; null when eth_type may change, see {@link
   * FrameClass}).
   */
  public record Depths(
      int wire,
      NavigableMap<Integer, Integer> entry,
      NavigableMap<Integer, Integer> exits,
      Map<FrameClass, Depths> byClass,
      Set<Long> inPorts,
      Set<Integer> ethTypes) {
    public Depths(
        int wire, NavigableMap<Integer, Integer> entry, NavigableMap<Integer, Integer> exits) {
      this(wire, entry, exits, Map.of(), Set.of(), Set.of());
    }

    public int at(int table) {
      Map.Entry<Integer, Integer> e = entry.floorEntry(table);
      return e == null ? wire : e.getValue();
    }

    public int after(int table) {
      int d = 0;
      for (int v : exits.tailMap(table, true).values()) {
        d = Math.max(d, v);
      }
      return d;
    }

    /**
     * The depths of the frames {@code r} can match: only the pushes of rules that may match the
     * same frames count.
     */
    public Depths of(VirtualRule r) {
      if (byClass.isEmpty()) {
        return this;
      }
      return byClass.getOrDefault(FrameClass.of(r.match()).within(inPorts, ethTypes), this);
    }
  }

  /**
   * What a frame keeps along the pipeline that tells rules apart: its in_port and eth_type, as a
   * rule matches them exactly (null = any; {@link #OTHER} = a value no pushing rule matches). A
   * frame's in_port never changes (set_field on in_port is refused) and its eth_type (the one after
   * the VLAN headers) changes only by an MPLS or PBB push or pop in apply-actions: while no rule
   * has one, eth_type is kept too. So a VLAN push of a rule matching another in_port or eth_type
   * than a later rule never reaches that rule's frames: that rule's depth leaves it out.
   */
  public record FrameClass(Long inPort, Integer ethType) {
    /** A value no pushing rule matches. */
    static final long OTHER = -1;

    static FrameClass of(Match m) {
      Long in =
          m.isExact(MatchField.IN_PORT)
              ? Integer.toUnsignedLong(m.get(MatchField.IN_PORT).getPortNumber())
              : null;
      Integer et = m.isExact(MatchField.ETH_TYPE) ? m.get(MatchField.ETH_TYPE).getValue() : null;
      return new FrameClass(in, et);
    }

    /**
     * This class among the values pushing rules match ({@code ethTypes} null: eth_type may change,
     * so it tells nothing).
     */
    FrameClass within(Set<Long> inPorts, Set<Integer> ethTypes) {
      Long in = inPort;
      if (in != null && !inPorts.contains(in)) {
        in = OTHER;
      }
      Integer et = ethTypes == null ? null : ethType;
      if (et != null && !ethTypes.contains(et)) {
        et = (int) OTHER;
      }
      return new FrameClass(in, et);
    }

    /** True if a rule of class {@code pusher} may match a frame of this class. */
    boolean meets(FrameClass pusher) {
      return (pusher.inPort == null || inPort == null || pusher.inPort.equals(inPort))
          && (pusher.ethType == null || ethType == null || pusher.ethType.equals(ethType));
    }
  }

  /** True if {@code m} matches vlan_vid at all (exact or masked: present, absent or an id). */
  public static boolean matchesVlan(Match m) {
    return m.isExact(MatchField.VLAN_VID) || m.isPartiallyMasked(MatchField.VLAN_VID);
  }

  private static List<OFAction> actions(OFInstruction i) {
    return i instanceof OFInstructionApplyActions a
        ? a.getActions()
        : i instanceof OFInstructionWriteActions w ? w.getActions() : List.of();
  }

  private static boolean any(VirtualRule r, Predicate<OFAction> p) {
    for (OFInstruction i : r.instructions()) {
      if (actions(i).stream().anyMatch(p)) {
        return true;
      }
    }
    return false;
  }

  /**
   * The table {@code r}'s frame goes on to if its action set holds an output to a vport, FLOOD/ALL
   * or a group: the set runs at the end of the pipeline, after the pushes of that table and later
   * ones ({@link Depths#after}); -1 if it has no such set or no goto_table.
   */
  public static int setGoesOn(VirtualRule r) {
    boolean set = false;
    int next = -1;
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionWriteActions w) {
        set =
            w.getActions().stream()
                .anyMatch(a -> WriteActionSet.isVportOutput(a) || a instanceof OFActionGroup);
      } else if (i instanceof OFInstructionGotoTable g) {
        next = g.getTableId().getValue();
      }
    }
    return set ? next : -1;
  }

  /**
   * True if {@code r}'s translation depends on the depth of its table: it may see a tagged frame
   * (it does not match "no VLAN") and outputs to a vport, FLOOD/ALL or a group (any of them may
   * cross PCIe after some remap; CONTROLLER and IN_PORT never take a carrier).
   */
  public static boolean reliesOnDepth(VirtualRule r) {
    return !MatchUtil.vlanAbsent(r.match())
        && any(r, a -> WriteActionSet.isVportOutput(a) || a instanceof OFActionGroup);
  }

  private static boolean pushes(VirtualRule r) {
    return any(r, a -> a.getType() == OFActionType.PUSH_VLAN);
  }

  private static boolean changesEthType(VirtualRule r) {
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionApplyActions a
          && a.getActions().stream().anyMatch(x -> TYPE_CHANGERS.contains(x.getType()))) {
        return true;
      }
    }
    return false;
  }

  private static final Set<OFActionType> TYPE_CHANGERS =
      EnumSet.of(
          OFActionType.PUSH_MPLS,
          OFActionType.POP_MPLS,
          OFActionType.PUSH_PBB,
          OFActionType.POP_PBB);

  public void add(VirtualRule r) {
    if (r == null) {
      return;
    }
    if (pushes(r)) {
      pushers.merge(r, 1, Integer::sum);
      depths = null;
    }
    if (changesEthType(r)) {
      typeChangers.merge(r, 1, Integer::sum);
      depths = null;
    }
  }

  public void remove(VirtualRule r) {
    if (r == null) {
      return;
    }
    if (pushes(r) && pushers.merge(r, -1, Integer::sum) <= 0) {
      pushers.remove(r);
      depths = null;
    }
    if (changesEthType(r) && typeChangers.merge(r, -1, Integer::sum) <= 0) {
      typeChangers.remove(r);
      depths = null;
    }
  }

  /**
   * The most VLAN headers a frame may carry when it enters {@code table} (at least {@link #wire}).
   */
  public int depth(int table) {
    return depths().at(table);
  }

  /**
   * The most VLAN headers a push in {@code table} or a later one may leave the frame with ({@link
   * Depths#after}).
   */
  public int later(int table) {
    return depths().after(table);
  }

  /**
   * The depths as they would be with {@code removed} replaced by {@code added}; this order is left
   * as it was.
   */
  public Depths depthsWith(Collection<VirtualRule> removed, Collection<VirtualRule> added) {
    removed.forEach(this::remove);
    added.forEach(this::add);
    try {
      return depths();
    } finally {
      added.forEach(this::remove);
      removed.forEach(this::add);
    }
  }

  /** The current depths, for comparison. */
  public Depths depths() {
    if (depths == null) {
      depths = compute();
    }
    return depths;
  }

  private Depths compute() {
    Depths all = compute(pushers.keySet());
    if (pushers.isEmpty()) {
      return all;
    }
    // The classes worth telling apart: the values pushing rules match, any value, any other one.
    boolean typesKept = typeChangers.isEmpty();
    Set<Long> inPorts = new TreeSet<>();
    Set<Integer> ethTypes = new TreeSet<>();
    for (VirtualRule p : pushers.keySet()) {
      FrameClass c = FrameClass.of(p.match());
      if (c.inPort() != null) {
        inPorts.add(c.inPort());
      }
      if (c.ethType() != null) {
        ethTypes.add(c.ethType());
      }
    }
    List<Long> ins = new ArrayList<>(inPorts);
    ins.add(null);
    ins.add(FrameClass.OTHER);
    List<Integer> types = new ArrayList<>();
    types.add(null);
    if (typesKept) {
      types.addAll(ethTypes);
      types.add((int) FrameClass.OTHER);
    }
    Map<FrameClass, Depths> byClass = new HashMap<>();
    for (Long in : ins) {
      for (Integer et : types) {
        FrameClass k = new FrameClass(in, et);
        List<VirtualRule> meeting = new ArrayList<>();
        for (VirtualRule p : pushers.keySet()) {
          FrameClass c = FrameClass.of(p.match());
          if (k.meets(typesKept ? c : new FrameClass(c.inPort(), null))) {
            meeting.add(p);
          }
        }
        Depths d = compute(meeting);
        if (!d.equals(all)) {
          byClass.put(k, d);
        }
      }
    }
    if (byClass.isEmpty()) {
      return all;
    }
    return new Depths(
        wire,
        all.entry(),
        all.exits(),
        Collections.unmodifiableMap(byClass),
        Collections.unmodifiableSet(inPorts),
        typesKept ? Collections.unmodifiableSet(ethTypes) : null);
  }

  /** The depths the pushes of {@code pushing} make (for any frame they may all reach). */
  private Depths compute(Collection<VirtualRule> pushing) {
    // What each push raises, in table order: a pusher's own entry depth depends on the tables
    // below it only (goto_table goes forward).
    List<VirtualRule> ordered = new ArrayList<>(pushing);
    ordered.sort(Comparator.comparingInt(VirtualRule::table));
    TreeMap<Integer, Integer> raise = new TreeMap<>();
    TreeMap<Integer, Integer> exits = new TreeMap<>();
    for (VirtualRule r : ordered) {
      int depth = MatchUtil.vlanAbsent(r.match()) ? 0 : stepAt(raise, r.table());
      boolean written = false;
      Integer gotoTable = null;
      for (OFInstruction i : r.instructions()) {
        if (i instanceof OFInstructionApplyActions a) {
          for (OFAction x : a.getActions()) {
            if (x.getType() == OFActionType.PUSH_VLAN) {
              depth = Math.min(Translator.MAX_VLAN_HEADERS, depth + 1); // OVS drops a third
            } else if (x.getType() == OFActionType.POP_VLAN) {
              depth = Math.max(0, depth - 1);
            }
          }
        } else if (i instanceof OFInstructionWriteActions w) {
          written |= w.getActions().stream().anyMatch(x -> x.getType() == OFActionType.PUSH_VLAN);
        } else if (i instanceof OFInstructionGotoTable g) {
          gotoTable = (int) g.getTableId().getValue();
        }
      }
      if (gotoTable != null && depth > wire) {
        raise.merge(gotoTable, depth, Math::max);
      }
      int end = written ? Math.min(Translator.MAX_VLAN_HEADERS, depth + 1) : depth;
      exits.merge(r.table(), end, Math::max);
      if (written) {
        raise.merge(r.table() + 1, end, Math::max);
      }
    }
    return new Depths(
        wire,
        Collections.unmodifiableNavigableMap(steps(raise)),
        Collections.unmodifiableNavigableMap(exits));
  }

  /** The depth at {@code table} of raises keyed by the first table they reach. */
  private int stepAt(TreeMap<Integer, Integer> raise, int table) {
    int d = wire;
    for (int v : raise.headMap(table, true).values()) {
      d = Math.max(d, v);
    }
    return d;
  }

  /** The step function of raises: from each key on, the running maximum. */
  private TreeMap<Integer, Integer> steps(TreeMap<Integer, Integer> raise) {
    TreeMap<Integer, Integer> out = new TreeMap<>();
    int d = wire;
    for (Map.Entry<Integer, Integer> e : raise.entrySet()) {
      if (e.getValue() > d) {
        d = e.getValue();
        out.put(e.getKey(), d);
      }
    }
    return out;
  }
}
