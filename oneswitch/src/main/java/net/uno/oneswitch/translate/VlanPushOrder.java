package net.uno.oneswitch.translate;

import java.util.List;
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
 * The cross-table VLAN bookkeeping of the flow-id carrier (pure, incremental like {@link
 * ActionSetOrder}). A rule that matches no {@code vlan_vid} cannot tell how many VLAN headers its
 * frame carries; if an earlier table may hand it a frame made QinQ by a push (one that came in
 * tagged, tagged again), a VLAN carrier tag would be a third header (the inner one lost). So such a
 * rule in a table a QinQ frame may reach is translated with a <em>deeper</em> frame ({@link
 * Carrier.Frame#deeper}): an output across PCIe takes the MPLS carrier (known eth_type) or is
 * refused.
 *
 * <p>Which tables a push reaches: a rule whose apply-actions may leave 2 VLAN headers (its match
 * and its pushes/pops: a rule matching "no VLAN" that pushes once leaves exactly one) and that goes
 * to table g makes tables g and above deeper (any of them may follow g); without goto_table its
 * frame reaches no other table. A push in an action set runs only at the end of the pipeline; it is
 * taken, conservatively, to reach every later table. Matches are ignored otherwise (static) and the
 * port map plays no part.
 *
 * <p>When the lowest reached table changes (a push added or removed), the core re-translates the
 * relying rules ({@link #reliesOnDepth}) of the tables in between; a push whose re-translations
 * cannot all be carried is refused (OneSwitchCore).
 */
public final class VlanPushOrder {
  // Per virtual table: pushes whose frame first reaches it; rules that rely (see reliesOnDepth).
  private static final int PUSH = 0;
  private static final int RELY = 1;

  private final TableCounts counts = new TableCounts(2);

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

  /** True if {@code r} pushes a VLAN (apply or write). */
  static boolean pushes(VirtualRule r) {
    return any(r, a -> a.getType() == OFActionType.PUSH_VLAN);
  }

  /**
   * True if {@code r}'s translation depends on whether a QinQ frame may reach its table: it matches
   * no vlan_vid and outputs to a vport, FLOOD/ALL or a group (any of them may cross PCIe after some
   * remap; CONTROLLER and IN_PORT never take a carrier).
   */
  public static boolean reliesOnDepth(VirtualRule r) {
    return !matchesVlan(r.match())
        && any(r, a -> WriteActionSet.isVportOutput(a) || a instanceof OFActionGroup);
  }

  /**
   * The lowest table whose rules may see a frame {@code r} pushed a VLAN onto while it carried one
   * already, or -1 (see the class doc).
   */
  static int firstReached(VirtualRule r) {
    int first = -1;
    int depth = MatchUtil.vlanPresent(r.match()) || !MatchUtil.vlanAbsent(r.match()) ? 1 : 0;
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionApplyActions a) {
        for (OFAction x : a.getActions()) {
          if (x.getType() == OFActionType.PUSH_VLAN) {
            depth++;
          } else if (x.getType() == OFActionType.POP_VLAN) {
            depth = Math.max(0, depth - 1);
          }
        }
      } else if (i instanceof OFInstructionWriteActions w
          && w.getActions().stream().anyMatch(x -> x.getType() == OFActionType.PUSH_VLAN)) {
        first = r.table() + 1;
      }
    }
    for (OFInstruction i : r.instructions()) {
      if (i instanceof OFInstructionGotoTable g && depth >= Translator.MAX_VLAN_HEADERS) {
        int t = g.getTableId().getValue();
        first = first < 0 ? t : Math.min(first, t);
      }
    }
    return first;
  }

  public void add(VirtualRule r) {
    update(r, 1);
  }

  public void remove(VirtualRule r) {
    update(r, -1);
  }

  private void update(VirtualRule r, int d) {
    if (r == null) {
      return;
    }
    int first = firstReached(r);
    if (first >= 0) {
      counts.add(first, PUSH, d);
    }
    if (reliesOnDepth(r)) {
      counts.add(r.table(), RELY, d);
    }
  }

  /** True if a QinQ frame pushed by an earlier table may reach {@code table}. */
  public boolean pushesBefore(int table) {
    return counts.first(table + 1, true, PUSH) >= 0;
  }

  /** The lowest table a push reaches ({@link Integer#MAX_VALUE} if none). */
  public int firstPushed() {
    int t = counts.first(-1, false, PUSH);
    return t < 0 ? Integer.MAX_VALUE : t;
  }

  /** True if a table in [{@code from}, {@code to}) holds a rule that relies on the depth. */
  public boolean reliesIn(int from, int to) {
    int t = counts.first(from - 1, false, RELY);
    return t >= 0 && t < to;
  }
}
