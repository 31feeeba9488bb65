package net.uno.oneswitch.oftable;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.action.OFActionPopMpls;
import org.projectfloodlight.openflow.protocol.action.OFActionPushMpls;
import org.projectfloodlight.openflow.protocol.action.OFActionPushVlan;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionClearActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionGotoTable;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteMetadata;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.protocol.match.MatchFields;
import org.projectfloodlight.openflow.types.Masked;
import org.projectfloodlight.openflow.types.OFPort;

/**
 * An in-process OpenFlow 1.3 switch for tests: a pipeline of flow tables and a group table with the
 * semantics OVS gives them (the truth where it and the spec differ), run on {@link Frame}s.
 *
 * <ul>
 *   <li>Lookup: the highest-priority entry whose every match field (with its mask) equals the
 *       frame's; a field whose header the frame lacks never matches. Two entries of the same
 *       priority that both match are undefined in OpenFlow and throw here. Prerequisites are
 *       checked when an entry is added (BAD_PREREQ). A table miss ends the pipeline; as on OVS (not
 *       as in the spec, which drops the frame) the action set written so far still runs.
 *   <li>Instructions in the spec's order, whatever their order in the entry: apply-actions,
 *       clear-actions, write-actions, write-metadata, goto-table (forward only); without a goto the
 *       action set runs and the pipeline ends.
 *   <li>Apply-actions run in list order on the frame; an output sends a copy. The action set runs
 *       in OVS's order: the last pop_vlan, pop_mpls, push_mpls, push_vlan; every set_field in the
 *       order written; then the last group, or else the last output. A group bucket is run as an
 *       action set too, on its own copy of the frame (OVS).
 *   <li>push_vlan adds an outermost header of VID 0 and PCP 0 (OVS: nothing is copied from an inner
 *       header) and keeps at most 2 (a third push drops the innermost); pop_vlan removes the
 *       outermost. push_mpls inserts a label after every VLAN header (bottom of stack with the IP
 *       TTL on a non-MPLS frame, a copy of the top entry otherwise); pop_mpls:ET removes the top
 *       one and makes the ethertype ET once none is left. set_field changes only a field the frame
 *       has (OVS).
 *   <li>Outputs: a port (never back to the in_port), IN_PORT, CONTROLLER, FLOOD and ALL (every port
 *       but the in_port). Groups: ALL (every bucket), INDIRECT (its bucket), SELECT (one bucket,
 *       chosen by a hash of the frame's headers: deterministic, the in_port not included).
 *   <li>Per-entry packet and byte counters.
 * </ul>
 */
public final class FakeOfTable {
  /** Port number of an output to the controller. */
  public static final int CONTROLLER = OFPort.CONTROLLER.getPortNumber();

  /** A frame sent out of {@code port} ({@link #CONTROLLER}: a packet-in). */
  public record Output(int port, Frame frame) {}

  /** A flow entry: its counters and who it stands for ({@code owner}, may be null). */
  public static final class Flow {
    final int table;
    final int priority;
    final Match match;
    final List<OFInstruction> instructions;
    final Object owner;
    final long seq;
    long packets;
    long bytes;

    Flow(int table, int priority, Match match, List<OFInstruction> ins, Object owner, long seq) {
      this.table = table;
      this.priority = priority;
      this.match = match;
      this.instructions = ins;
      this.owner = owner;
      this.seq = seq;
    }

    public Object owner() {
      return owner;
    }

    public int table() {
      return table;
    }

    public int priority() {
      return priority;
    }

    public Match match() {
      return match;
    }

    public List<OFInstruction> instructions() {
      return instructions;
    }

    public long packets() {
      return packets;
    }

    public long bytes() {
      return bytes;
    }

    @Override
    public String toString() {
      return "table=" + table + " priority=" + priority + " " + match + " " + instructions;
    }
  }

  private record Group(OFGroupType type, List<OFBucket> buckets) {}

  private final String name;
  private final Set<Integer> ports;
  private final List<Flow> flows = new ArrayList<>();
  private final Map<Integer, Group> groups = new HashMap<>();
  private long seq;
  private Tie tie = Tie.THROW;

  /** Per table: {lookups, matches}, as an OpenFlow switch's TABLE statistics count them. */
  private final Map<Integer, long[]> tableCounts = new HashMap<>();

  /**
   * What a lookup does when two matching entries have the same priority (undefined in OpenFlow: a
   * real switch picks one): throw, or let the entry with (or without) an owner win, to check both
   * picks a switch may make.
   */
  public enum Tie {
    THROW,
    OWNED_WINS,
    UNOWNED_WINS
  }

  /** Sets what a lookup does on a priority tie (default {@link Tie#THROW}). */
  public void tie(Tie t) {
    tie = t;
  }

  /** A switch named {@code name} with ports {@code ports} (FLOOD and ALL go to them). */
  public FakeOfTable(String name, Set<Integer> ports) {
    this.name = name;
    this.ports = new TreeSet<>(ports);
  }

  public String name() {
    return name;
  }

  /** Adds an entry; an identical one (table, priority, match) is replaced, counters reset. */
  public Flow addFlow(
      int table, int priority, Match match, List<OFInstruction> instructions, Object owner) {
    Fields.checkPrerequisites(match);
    for (OFInstruction i : instructions) {
      if (i instanceof OFInstructionGotoTable g && g.getTableId().getValue() <= table) {
        throw new IllegalArgumentException("BAD_TABLE_ID: goto_table must go forward");
      }
    }
    deleteStrict(table, priority, match);
    Flow f = new Flow(table, priority, match, instructions, owner, seq++);
    flows.add(f);
    return f;
  }

  /** Deletes the entry (table, priority, match), if any. */
  public void deleteStrict(int table, int priority, Match match) {
    flows.removeIf(f -> f.table == table && f.priority == priority && f.match.equals(match));
  }

  public void addGroup(int id, OFGroupType type, List<OFBucket> buckets) {
    if (type == OFGroupType.INDIRECT && buckets.size() != 1) {
      throw new IllegalArgumentException("indirect group needs one bucket");
    }
    groups.put(id, new Group(type, List.copyOf(buckets)));
  }

  public List<Flow> flows() {
    return List.copyOf(flows);
  }

  /** Table {@code table}'s {lookups, matches} so far (a new array). */
  public long[] tableCounts(int table) {
    return tableCounts.getOrDefault(table, new long[2]).clone();
  }

  // ------------------------------------------------------------------ the pipeline

  /** What one frame does in the pipeline. */
  private final class Run {
    final int inPort;
    long metadata;
    long tunnelId; // OVS: 0 on a frame from a port without a tunnel; set_field writes it
    final List<OFAction> actionSet = new ArrayList<>();
    final List<Output> out = new ArrayList<>();

    Run(int inPort) {
      this.inPort = inPort;
    }
  }

  /** Runs a frame that came in on {@code inPort} through the pipeline from table 0. */
  public List<Output> process(Frame frame, int inPort) {
    Run run = new Run(inPort);
    Frame fr = frame.copy();
    int table = 0;
    while (true) {
      Flow f = lookup(table, fr, run);
      long[] tc = tableCounts.computeIfAbsent(table, k -> new long[2]);
      tc[0]++;
      if (f != null) {
        tc[1]++;
      }
      if (f == null) {
        // A table miss ends the pipeline. OpenFlow 1.3 drops the frame there, but OVS still runs
        // the action set written so far (checked with ofproto/trace on OVS 3.1): OVS is the truth.
        actions(actionSetOrder(run.actionSet), fr, run);
        return run.out;
      }
      f.packets++;
      f.bytes += Frames.length(fr);
      Integer next = null;
      OFInstructionApplyActions apply = null;
      boolean clear = false;
      OFInstructionWriteActions write = null;
      OFInstructionWriteMetadata meta = null;
      for (OFInstruction i : f.instructions) {
        if (i instanceof OFInstructionApplyActions a) {
          apply = a;
        } else if (i instanceof OFInstructionClearActions) {
          clear = true;
        } else if (i instanceof OFInstructionWriteActions w) {
          write = w;
        } else if (i instanceof OFInstructionWriteMetadata m) {
          meta = m;
        } else if (i instanceof OFInstructionGotoTable g) {
          next = (int) g.getTableId().getValue();
        } else {
          throw new UnsupportedOperationException("instruction " + i.getType());
        }
      }
      if (apply != null && !actions(apply.getActions(), fr, run)) {
        return run.out;
      }
      if (clear) {
        run.actionSet.clear();
      }
      if (write != null) {
        run.actionSet.addAll(write.getActions());
      }
      if (meta != null) {
        long mask = meta.getMetadataMask().getValue();
        run.metadata = (run.metadata & ~mask) | (meta.getMetadata().getValue() & mask);
      }
      if (next == null) {
        actions(actionSetOrder(run.actionSet), fr, run);
        return run.out;
      }
      table = next;
    }
  }

  private Flow lookup(int table, Frame fr, Run run) {
    Fields.Pipeline p = new Fields.Pipeline(run.inPort & 0xffffffffL, run.metadata, run.tunnelId);
    Flow best = null;
    for (Flow f : flows) {
      if (f.table != table || !matches(f.match, fr, p)) {
        continue;
      }
      if (best != null
          && best.priority == f.priority
          && tie != Tie.THROW
          && (best.owner != null) != (f.owner != null)) {
        if ((f.owner != null) == (tie == Tie.OWNED_WINS)) {
          best = f;
        }
        continue;
      }
      if (best != null && best.priority == f.priority) {
        throw new IllegalStateException(
            name
                + ": two entries of priority "
                + f.priority
                + " match "
                + fr
                + ": "
                + best
                + " and "
                + f);
      }
      if (best == null || f.priority > best.priority) {
        best = f;
      }
    }
    return best;
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  static boolean matches(Match m, Frame fr, Fields.Pipeline p) {
    for (MatchField<?> mf : m.getMatchFields()) {
      long[] have = Fields.read(fr, mf.id, p);
      if (have == null) {
        return false;
      }
      long[] want;
      long[] mask;
      if (m.isExact(mf)) {
        want = Fields.bits(m.get(mf));
        mask = null;
      } else {
        Masked<?> mk = m.getMasked((MatchField) mf);
        want = Fields.bits(mk.getValue());
        mask = Fields.bits(mk.getMask());
      }
      for (int i = 0; i < want.length; i++) {
        long k = mask == null ? -1L : mask[i];
        if ((have[i] & k) != (want[i] & k)) {
          return false;
        }
      }
    }
    return true;
  }

  /**
   * An action set as the action list OVS runs at the end of the pipeline or for a group bucket: the
   * last pop_vlan, pop_mpls, push_mpls, push_vlan; every set_field in order; the last group, or
   * else the last output.
   */
  static List<OFAction> actionSetOrder(List<OFAction> set) {
    List<OFAction> out = new ArrayList<>();
    for (Class<?> c :
        List.of(
            org.projectfloodlight.openflow.protocol.action.OFActionPopVlan.class,
            OFActionPopMpls.class,
            OFActionPushMpls.class,
            OFActionPushVlan.class)) {
      last(set, c, out);
    }
    for (OFAction a : set) {
      if (a instanceof OFActionSetField) {
        out.add(a);
      } else if (!(a instanceof OFActionOutput
          || a instanceof OFActionGroup
          || a instanceof OFActionPushVlan
          || a instanceof OFActionPushMpls
          || a instanceof OFActionPopMpls
          || a instanceof org.projectfloodlight.openflow.protocol.action.OFActionPopVlan)) {
        throw new UnsupportedOperationException("action in a set: " + a.getType());
      }
    }
    if (!last(set, OFActionGroup.class, out)) {
      last(set, OFActionOutput.class, out);
    }
    return out;
  }

  private static boolean last(List<OFAction> set, Class<?> c, List<OFAction> out) {
    for (int i = set.size() - 1; i >= 0; i--) {
      if (c.isInstance(set.get(i))) {
        out.add(set.get(i));
        return true;
      }
    }
    return false;
  }

  /** Runs an action list on {@code fr}; false if the frame is gone (it was dropped). */
  private boolean actions(List<OFAction> list, Frame fr, Run run) {
    for (OFAction a : list) {
      if (a instanceof OFActionOutput o) {
        output(o.getPort(), fr, run);
      } else if (a instanceof OFActionGroup g) {
        group(g.getGroup().getGroupNumber(), fr, run, 0);
      } else if (a instanceof OFActionSetField sf
          && sf.getField().getMatchField().id == MatchFields.TUNNEL_ID) {
        run.tunnelId =
            ((org.projectfloodlight.openflow.types.U64) sf.getField().getValue()).getValue();
      } else {
        Frames.apply(a, fr);
      }
    }
    return true;
  }

  private void output(OFPort port, Frame fr, Run run) {
    if (port.equals(OFPort.IN_PORT)) {
      run.out.add(new Output(run.inPort, fr.copy()));
    } else if (port.equals(OFPort.CONTROLLER)) {
      run.out.add(new Output(CONTROLLER, fr.copy()));
    } else if (port.equals(OFPort.FLOOD) || port.equals(OFPort.ALL)) {
      for (int p : ports) {
        if (p != run.inPort) {
          run.out.add(new Output(p, fr.copy()));
        }
      }
    } else if (Integer.compareUnsigned(port.getPortNumber(), OFPort.MAX.getPortNumber()) > 0) {
      throw new UnsupportedOperationException(name + ": output to " + port);
    } else if (port.getPortNumber() != run.inPort) {
      run.out.add(new Output(port.getPortNumber(), fr.copy())); // never back out of its in_port
    }
  }

  private void group(int id, Frame fr, Run run, int depth) {
    Group g = groups.get(id);
    if (g == null) {
      throw new IllegalStateException(name + ": no group " + Integer.toHexString(id));
    }
    if (depth > 8) {
      throw new IllegalStateException(name + ": group chain too deep");
    }
    List<OFBucket> chosen =
        switch (g.type()) {
          case ALL -> g.buckets();
          case INDIRECT -> g.buckets();
          case SELECT ->
              g.buckets().isEmpty()
                  ? List.of()
                  : List.of(g.buckets().get(Math.floorMod(Frames.hash(fr), g.buckets().size())));
          default -> throw new UnsupportedOperationException("group type " + g.type());
        };
    for (OFBucket b : chosen) {
      Frame copy = fr.copy();
      for (OFAction a : actionSetOrder(b.getActions())) {
        if (a instanceof OFActionGroup ag) {
          group(ag.getGroup().getGroupNumber(), copy, run, depth + 1);
        } else if (a instanceof OFActionOutput o) {
          output(o.getPort(), copy, run);
        } else {
          Frames.apply(a, copy);
        }
      }
    }
  }

  /** Sorts outputs by port, then frame (a multiset in a canonical order). */
  public static List<String> canonical(List<Output> out) {
    List<String> l = new ArrayList<>();
    out.stream()
        .sorted(
            Comparator.comparingLong((Output o) -> o.port() & 0xffffffffL)
                .thenComparing(o -> o.frame().toString()))
        .forEach(o -> l.add(o.port() + ": " + o.frame()));
    return l;
  }
}
