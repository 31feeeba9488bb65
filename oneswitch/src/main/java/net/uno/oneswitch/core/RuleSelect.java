package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.function.IntPredicate;
import net.uno.oneswitch.model.MatchKeys;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.translate.MatchUtil;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * Which virtual rules a controller's request selects (OpenFlow 1.3 section 6.4 / 7.3.5 semantics:
 * table, cookie under its mask, a strict or a non-strict match, out_port / out_group). Pure.
 */
final class RuleSelect {
  private RuleSelect() {}

  /**
   * The rules a MODIFY or DELETE {@code fm} applies to in {@code table} (-1: every table); {@code
   * outFilter}: also by out_port / out_group (DELETE only; MODIFY ignores them).
   */
  static List<VirtualRule> forFlowMod(
      Collection<VirtualRule> rules, OFFlowMod fm, int table, boolean strict, boolean outFilter) {
    List<VirtualRule> out = new ArrayList<>();
    String mkey = strict ? MatchKeys.of(fm.getMatch()) : null;
    long mask = fm.getCookieMask().getValue();
    long cookie = fm.getCookie().getValue() & mask;
    for (VirtualRule r : rules) {
      if (table >= 0 && r.table() != table) {
        continue;
      }
      if ((r.cookie() & mask) != cookie) {
        continue;
      }
      if (strict) {
        if (r.priority() != fm.getPriority() || !r.key().match().equals(mkey)) {
          continue;
        }
      } else if (!MatchUtil.isSubset(r.match(), fm.getMatch())) {
        continue;
      }
      if (outFilter && !outputsTo(r, fm.getOutPort(), fm.getOutGroup())) {
        continue;
      }
      out.add(r);
    }
    return out;
  }

  /** The rules a flow or aggregate statistics request selects (non-strict match). */
  static List<VirtualRule> forStats(
      Collection<VirtualRule> rules,
      TableId table,
      OFPort outPort,
      OFGroup outGroup,
      U64 cookie,
      U64 mask,
      Match match) {
    List<VirtualRule> out = new ArrayList<>();
    long m = mask.getValue();
    for (VirtualRule r : rules) {
      if (!table.equals(TableId.ALL) && r.table() != table.getValue()) {
        continue;
      }
      if ((r.cookie() & m) != (cookie.getValue() & m)) {
        continue;
      }
      if (!MatchUtil.isSubset(r.match(), match)) {
        continue;
      }
      if (!outputsTo(r, outPort, outGroup)) {
        continue;
      }
      out.add(r);
    }
    return out;
  }

  /** Whether {@code r} outputs to {@code port} and to {@code group} (ANY: no condition). */
  static boolean outputsTo(VirtualRule r, OFPort port, OFGroup group) {
    boolean anyPort = port.equals(OFPort.ANY);
    boolean anyGroup = group.equals(OFGroup.ANY);
    if (anyPort && anyGroup) {
      return true;
    }
    boolean okPort = anyPort;
    boolean okGroup = anyGroup;
    for (OFAction a : actionsOf(r)) {
      if (a instanceof OFActionOutput o && o.getPort().equals(port)) {
        okPort = true;
      }
      if (a instanceof OFActionGroup g && g.getGroup().equals(group)) {
        okGroup = true;
      }
    }
    return okPort && okGroup;
  }

  /** Whether an action of {@code r} (applied or written) sends to a group {@code which} accepts. */
  static boolean usesGroup(VirtualRule r, IntPredicate which) {
    for (OFAction a : actionsOf(r)) {
      if (a instanceof OFActionGroup g && which.test(g.getGroup().getGroupNumber())) {
        return true;
      }
    }
    return false;
  }

  /** The rules of {@code rules} using group {@code id}. */
  static List<VirtualRule> usingGroup(Collection<VirtualRule> rules, int id) {
    List<VirtualRule> out = new ArrayList<>();
    for (VirtualRule r : rules) {
      if (usesGroup(r, g -> g == id)) {
        out.add(r);
      }
    }
    return out;
  }

  /** The apply-actions and write-actions of {@code r}, in instruction order. */
  static List<OFAction> actionsOf(VirtualRule r) {
    List<OFAction> out = new ArrayList<>();
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionApplyActions a) {
        out.addAll(a.getActions());
      } else if (i instanceof OFInstructionWriteActions w) {
        out.addAll(w.getActions());
      }
    }
    return out;
  }
}
