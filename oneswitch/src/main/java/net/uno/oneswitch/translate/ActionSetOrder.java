package net.uno.oneswitch.translate;

import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionClearActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;

/**
 * The cross-table action-set check of {@link WriteActionSet}. A set output to a vport becomes a
 * carrier GROUP, and a group in the set wins over an output (OF1.3 5.10), so two orders the virtual
 * switch and the translation would run differently:
 *
 * <ul>
 *   <li>an earlier table writes the controller's {@code group:G}, a later one {@code output:V}: the
 *       virtual switch runs G, the translation the carrier of V (the later group write replaces G);
 *   <li>an earlier table writes {@code output:V}, a later one an output to a reserved port
 *       (CONTROLLER, IN_PORT): the virtual switch outputs there, the translation runs the carrier.
 * </ul>
 *
 * <p>Statically (any rule in a lower table may precede any rule in a higher one; goto_table only
 * goes forward) a flow-mod that would create such a pair is refused with BAD_ACTION/
 * UNSUPPORTED_ORDER, unless the later rule has clear_actions (which runs before its write). The
 * check depends on the virtual rules only, so a port map change never makes an accepted rule
 * unfaithful.
 */
public final class ActionSetOrder {
  // Per virtual table, how many rules write: a group; an output to a vport; an output to a vport
  // without clear_actions; an output to a reserved port without clear_actions.
  private static final int GROUP = 0;
  private static final int VOUT = 1;
  private static final int VOUT_KEEP = 2;
  private static final int ROUT_KEEP = 3;

  private final TableCounts counts = new TableCounts(4);

  /** What a rule's write_actions put in the set as its final action. */
  enum Kind {
    NONE,
    GROUP,
    VPORT_OUTPUT,
    RESERVED_OUTPUT
  }

  static Kind kind(VirtualRule r) {
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionWriteActions w) {
        OFAction last = null;
        for (OFAction a : w.getActions()) {
          if (a instanceof OFActionGroup) {
            return Kind.GROUP;
          }
          if (a instanceof OFActionOutput) {
            last = a;
          }
        }
        if (last == null) {
          return Kind.NONE;
        }
        return WriteActionSet.isVportOutput(last) ? Kind.VPORT_OUTPUT : Kind.RESERVED_OUTPUT;
      }
    }
    return Kind.NONE;
  }

  private static boolean clears(VirtualRule r) {
    return r.instructions().stream().anyMatch(i -> i instanceof OFInstructionClearActions);
  }

  /** True if {@code earlier} (lower table) then {@code later} would run differently translated. */
  static boolean conflict(VirtualRule earlier, VirtualRule later) {
    if (clears(later)) {
      return false;
    }
    Kind a = kind(earlier);
    Kind b = kind(later);
    return (a == Kind.GROUP && b == Kind.VPORT_OUTPUT)
        || (a == Kind.VPORT_OUTPUT && b == Kind.RESERVED_OUTPUT);
  }

  /** Counts an installed rule (null: nothing). */
  public void add(VirtualRule r) {
    update(r, 1);
  }

  /** Forgets an installed rule (null: nothing). */
  public void remove(VirtualRule r) {
    update(r, -1);
  }

  private void update(VirtualRule r, int d) {
    if (r == null) {
      return;
    }
    Kind k = kind(r);
    if (k == Kind.NONE) {
      return;
    }
    boolean keep = !clears(r);
    int t = r.table();
    switch (k) {
      case GROUP -> counts.add(t, GROUP, d);
      case VPORT_OUTPUT -> {
        counts.add(t, VOUT, d);
        counts.add(t, VOUT_KEEP, keep ? d : 0);
      }
      case RESERVED_OUTPUT -> counts.add(t, ROUT_KEEP, keep ? d : 0);
      default -> {}
    }
  }

  /**
   * Refuses {@code cand} if, with the counted rules (those of its own table do not matter: a rule
   * it replaces, or the other rules one MODIFY changes), some pair of tables would run a different
   * action set translated. Costs O(tables in use), not O(rules).
   */
  public void check(VirtualRule cand) throws OfError {
    Kind k = kind(cand);
    boolean keep = !clears(cand);
    int t = cand.table();
    switch (k) {
      case GROUP ->
          refuseIf(t, counts.first(t, false, VOUT_KEEP), "a group", "an output to a virtual port");
      case VPORT_OUTPUT -> {
        if (keep) {
          refuseIf(counts.first(t, true, GROUP), t, "a group", "an output to a virtual port");
        }
        refuseIf(
            t,
            counts.first(t, false, ROUT_KEEP),
            "an output to a virtual port",
            "an output to a reserved port");
      }
      case RESERVED_OUTPUT -> {
        if (keep) {
          refuseIf(
              counts.first(t, true, VOUT),
              t,
              "an output to a virtual port",
              "an output to a reserved port");
        }
      }
      default -> {}
    }
  }

  private static void refuseIf(int earlier, int later, String what1, String what2) throws OfError {
    if (earlier < 0 || later < 0) {
      return;
    }
    throw new OfError(
        OFBadActionCode.UNSUPPORTED_ORDER,
        "action set: table "
            + earlier
            + " writes "
            + what1
            + " and table "
            + later
            + " writes "
            + what2
            + "; OneSwitch carries a set output to a virtual port as a group, which would take"
            + " precedence differently (clear_actions in the later table, or apply_actions)");
  }

  /** {@link #check(VirtualRule)} against {@code rules} (tests, one-off checks). */
  public static void check(VirtualRule cand, Iterable<VirtualRule> rules) throws OfError {
    ActionSetOrder o = new ActionSetOrder();
    rules.forEach(o::add);
    o.check(cand);
  }
}
