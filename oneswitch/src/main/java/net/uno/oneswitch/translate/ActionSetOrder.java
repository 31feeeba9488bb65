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
  private ActionSetOrder() {}

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

  /**
   * Refuses {@code cand} if, with the installed {@code rules} (a rule with its key is replaced by
   * it), some pair of tables would run a different action set translated.
   */
  public static void check(VirtualRule cand, Iterable<VirtualRule> rules) throws OfError {
    if (kind(cand) == Kind.NONE) {
      return;
    }
    for (VirtualRule o : rules) {
      if (o.table() == cand.table()) {
        continue;
      }
      boolean candFirst = cand.table() < o.table();
      VirtualRule earlier = candFirst ? cand : o;
      VirtualRule later = candFirst ? o : cand;
      if (conflict(earlier, later)) {
        throw new OfError(
            OFBadActionCode.UNSUPPORTED_ORDER,
            "action set: table "
                + earlier.table()
                + " writes "
                + (kind(earlier) == Kind.GROUP ? "a group" : "an output to a virtual port")
                + " and table "
                + later.table()
                + " (priority "
                + o.priority()
                + ") writes "
                + (kind(later) == Kind.VPORT_OUTPUT
                    ? "an output to a virtual port"
                    : "an output to a reserved port")
                + "; OneSwitch carries a set output to a virtual port as a group, which would take"
                + " precedence differently (clear_actions in the later table, or apply_actions)");
      }
    }
  }
}
