package net.uno.oneswitch.core;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.Offload;
import net.uno.oneswitch.translate.VlanPushOrder;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteMetadata;
import org.projectfloodlight.openflow.protocol.match.MatchField;

/**
 * The offload verdicts of {@code GET /v1/tables}: per (table, sNIC), null if the table could move
 * there now, else why not. A verdict is a trial translation of every rule with the table there; it
 * is kept, with the physical rules per switch that trial holds, and brought up to date by the rules
 * that changed since: a rule added is translated alone with the table there (a failure is the
 * verdict), a rule removed takes its physical rules off the counts, which are checked against
 * {@code max_rules} again. What a rule's translation depends on beyond itself (the port map, the
 * groups, the VLAN depths, the placement) changing, or a changed rule that writes or matches
 * metadata or uses a group (other rules' checks and carrier groups depend on those), or a rule
 * removed where one could not be carried (it may have been the reason), re-runs the whole trial.
 * Core thread only.
 */
final class OffloadVerdicts {
  /** The trials a verdict comes from ({@link TableMoves}: the same checks as a move's). */
  interface Trials {
    /**
     * The physical rules per switch of every rule and handoff translated with table {@code t} on
     * {@code sw}; the reason if a rule cannot be carried.
     */
    Map<String, Integer> whole(int t, String sw) throws PortError;

    /** The physical rules per switch of rule {@code r} with table {@code t} on {@code sw}. */
    Map<String, Integer> rule(int t, String sw, VirtualRule r) throws PortError;

    /** Why {@code counts} put too many rules on a switch with table {@code t} on {@code sw}. */
    String overLimit(int t, String sw, Map<String, Integer> counts);
  }

  /**
   * A verdict: why not (null: movable) and, unless a rule cannot be carried, its trial's rules per
   * switch (a verdict of {@code max_rules} follows them).
   */
  private record Verdict(String why, Map<String, Integer> counts) {}

  /** What a rule's translation depends on beyond the rule. */
  private record Context(
      Offload offload,
      PortMap ports,
      Map<Integer, VirtualGroup> groups,
      VlanPushOrder.Depths depths) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Context c
          && c.ports == ports // a new port map is a new object
          && c.offload.equals(offload)
          && c.groups.equals(groups)
          && c.depths.equals(depths);
    }

    @Override
    public int hashCode() {
      return Objects.hash(offload, System.identityHashCode(ports));
    }
  }

  private final VirtualSwitch vs;
  private final Planner planner;
  private final Trials trials;
  private final Map<String, Verdict> verdicts = new HashMap<>();

  /** The rules as the verdicts know them (the same objects: a changed rule is another object). */
  private Map<VirtualRule.Key, VirtualRule> rulesSeen = Map.of();

  private long changesSeen = -1;
  private Context context;

  /** How many whole trials and single rules were translated (for the bench and tests). */
  private long wholeTrials;

  private long ruleTrials;

  OffloadVerdicts(VirtualSwitch vs, Planner planner, Trials trials) {
    this.vs = vs;
    this.planner = planner;
    this.trials = trials;
  }

  /** Null if table {@code t} could move to {@code sw} now, else why not (nothing changes). */
  String of(int t, String sw) {
    catchUp();
    String k = t + "/" + sw;
    Verdict v = verdicts.get(k);
    if (v == null) {
      v = whole(t, sw);
      verdicts.put(k, v);
    }
    return v.why();
  }

  /** {whole trials, single-rule trials} so far. */
  long[] trials() {
    return new long[] {wholeTrials, ruleTrials};
  }

  private Verdict whole(int t, String sw) {
    wholeTrials++;
    try {
      Map<String, Integer> counts = trials.whole(t, sw);
      return new Verdict(trials.overLimit(t, sw, counts), counts);
    } catch (PortError e) {
      return new Verdict(e.getMessage(), null);
    }
  }

  /** Brings every kept verdict up to the rules and context as they are now. */
  private void catchUp() {
    Context now = new Context(planner.offload(), vs.ports(), Map.copyOf(vs.groups()), vs.depths());
    if (vs.changes() == changesSeen && now.equals(context)) {
      return;
    }
    Map<VirtualRule.Key, VirtualRule> rules = vs.rules();
    if (!now.equals(context)) {
      verdicts.clear();
    } else if (!verdicts.isEmpty()) {
      update(changed(rulesSeen, rules));
    }
    context = now;
    changesSeen = vs.changes();
    rulesSeen = new HashMap<>(rules);
  }

  /** The rules changed from {@code before} to {@code after}: {old, new} (either null). */
  private static List<VirtualRule[]> changed(
      Map<VirtualRule.Key, VirtualRule> before, Map<VirtualRule.Key, VirtualRule> after) {
    List<VirtualRule[]> out = new java.util.ArrayList<>();
    for (Map.Entry<VirtualRule.Key, VirtualRule> e : after.entrySet()) {
      VirtualRule old = before.get(e.getKey());
      if (old != e.getValue()) {
        out.add(new VirtualRule[] {old, e.getValue()});
      }
    }
    for (Map.Entry<VirtualRule.Key, VirtualRule> e : before.entrySet()) {
      if (!after.containsKey(e.getKey())) {
        out.add(new VirtualRule[] {e.getValue(), null});
      }
    }
    return out;
  }

  private void update(List<VirtualRule[]> changes) {
    for (VirtualRule[] c : changes) {
      for (VirtualRule r : c) {
        if (r != null && reachesOthers(r)) {
          verdicts.clear();
          return;
        }
      }
    }
    for (Map.Entry<String, Verdict> e : verdicts.entrySet()) {
      String[] ts = e.getKey().split("/", 2);
      int t = Integer.parseInt(ts[0]);
      String sw = ts[1];
      e.setValue(update(t, sw, e.getValue(), changes));
    }
  }

  private Verdict update(int t, String sw, Verdict v, List<VirtualRule[]> changes) {
    if (v.counts() == null) { // a rule cannot be carried: still so, unless a rule went
      boolean removed = changes.stream().anyMatch(c -> c[0] != null);
      return removed ? whole(t, sw) : v;
    }
    Map<String, Integer> counts = new HashMap<>(v.counts());
    try {
      for (VirtualRule[] c : changes) {
        if (c[0] != null) {
          ruleTrials++;
          trials.rule(t, sw, c[0]).forEach((s, n) -> counts.merge(s, -n, Integer::sum));
        }
        if (c[1] != null) {
          ruleTrials++;
          trials.rule(t, sw, c[1]).forEach((s, n) -> counts.merge(s, n, Integer::sum));
        }
      }
    } catch (PortError e) {
      return new Verdict(e.getMessage(), null);
    }
    return new Verdict(trials.overLimit(t, sw, counts), counts);
  }

  /**
   * True if what {@code r} is changes how other rules translate or are checked: it writes or
   * matches metadata (the handoff checks look at every rule for those), or it uses a group (the
   * carrier groups of write_actions are shared).
   */
  private static boolean reachesOthers(VirtualRule r) {
    if (r.match().isPartiallyMasked(MatchField.METADATA)
        || r.match().isExact(MatchField.METADATA)) {
      return true;
    }
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionWriteMetadata) {
        return true;
      }
      List<OFAction> acts =
          i instanceof OFInstructionApplyActions a
              ? a.getActions()
              : i instanceof OFInstructionWriteActions w ? w.getActions() : List.of();
      if (acts.stream().anyMatch(a -> a instanceof OFActionGroup)) {
        return true;
      }
    }
    return false;
  }
}
