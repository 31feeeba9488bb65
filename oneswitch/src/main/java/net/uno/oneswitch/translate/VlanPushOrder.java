package net.uno.oneswitch.translate;

import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;

/**
 * The cross-table VLAN check of the flow-id carrier (pure, incremental like {@link
 * ActionSetOrder}). A rule that matches no {@code vlan_vid} cannot tell how many VLAN headers its
 * frame carries; if a lower table pushes a VLAN, the frame may be QinQ and a VLAN carrier tag would
 * be a third header (the inner one lost). So such a rule in a table after a pushing table is
 * translated with a <em>deeper</em> frame ({@link Carrier.Frame#deeper}): an output across PCIe
 * takes the MPLS carrier (known eth_type) or is refused. And a flow-mod that would add the first
 * push before a table holding such a rule (one already translated as if nothing was pushed) is
 * refused with BAD_ACTION/UNSUPPORTED_ORDER: fail closed. Static (any rule in a lower table may
 * precede one in a higher table; matches are ignored) and independent of the port map, so a remap
 * never changes what it decides.
 */
public final class VlanPushOrder {
  // Per virtual table, how many rules push a VLAN; how many rely (see reliesOnDepth).
  private static final int PUSH = 0;
  private static final int RELY = 1;

  private final TableCounts counts = new TableCounts(2);

  /** True if {@code m} matches vlan_vid at all (exact or masked: present, absent or an id). */
  public static boolean matchesVlan(Match m) {
    return m.isExact(MatchField.VLAN_VID) || m.isPartiallyMasked(MatchField.VLAN_VID);
  }

  private static boolean any(VirtualRule r, java.util.function.Predicate<OFAction> p) {
    for (OFInstruction i : r.instructions()) {
      java.util.List<OFAction> acts =
          i instanceof OFInstructionApplyActions a
              ? a.getActions()
              : i instanceof OFInstructionWriteActions w ? w.getActions() : java.util.List.of();
      if (acts.stream().anyMatch(p)) {
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
   * True if {@code r}'s translation depends on whether a lower table pushes: it matches no vlan_vid
   * and outputs to a vport, FLOOD/ALL or a group (any of them may cross PCIe after some remap;
   * CONTROLLER and IN_PORT never take a carrier).
   */
  static boolean reliesOnDepth(VirtualRule r) {
    return !matchesVlan(r.match())
        && any(r, a -> WriteActionSet.isVportOutput(a) || a instanceof OFActionGroup);
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
    boolean push = pushes(r);
    boolean rely = reliesOnDepth(r);
    if (!push && !rely) {
      return;
    }
    counts.add(r.table(), PUSH, push ? d : 0);
    counts.add(r.table(), RELY, rely ? d : 0);
  }

  /** True if a table below {@code table} holds a rule that pushes a VLAN. */
  public boolean pushesBefore(int table) {
    return counts.first(table, true, PUSH) >= 0;
  }

  /**
   * Refuses {@code cand} if it pushes a VLAN and a higher table holds a rule translated as if no
   * lower table pushed (matching no vlan_vid, with an output or group, and no push below it yet).
   */
  public void check(VirtualRule cand) throws OfError {
    if (!pushes(cand)) {
      return;
    }
    int t = cand.table();
    // The first higher table with such a rule: if a push below it exists already, it (and every
    // higher table) was translated for a possibly pushed frame.
    int u = counts.first(t, false, RELY);
    if (u < 0 || pushesBefore(u)) {
      return;
    }
    throw new OfError(
        OFBadActionCode.UNSUPPORTED_ORDER,
        "table "
            + t
            + " would push a VLAN before table "
            + u
            + ", whose rules match no vlan_vid and were translated as if no table before"
            + " pushed one (their flow-id carrier could become a third VLAN header); add the"
            + " push first, or match vlan_vid in table "
            + u);
  }
}
