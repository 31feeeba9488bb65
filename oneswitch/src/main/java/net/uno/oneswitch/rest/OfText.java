package net.uno.oneswitch.rest;

import java.util.ArrayList;
import java.util.List;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionGroup;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.action.OFActionPopMpls;
import org.projectfloodlight.openflow.protocol.action.OFActionPushMpls;
import org.projectfloodlight.openflow.protocol.action.OFActionPushVlan;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionGotoTable;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteActions;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionWriteMetadata;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.oxm.OFOxm;
import org.projectfloodlight.openflow.types.OFPort;

/** Compact ovs-ofctl-like text of matches, actions and instructions (for the REST listing). */
public final class OfText {
  private OfText() {}

  public static String match(Match m) {
    List<String> parts = new ArrayList<>();
    for (OFOxm<?> o : net.uno.oneswitch.translate.MatchUtil.oxms(m)) {
      parts.add(
          o.getMatchField().getName()
              + "="
              + o.getValue()
              + (o.isMasked() ? "/" + o.getMask() : ""));
    }
    return parts.isEmpty() ? "*" : String.join(",", parts);
  }

  public static String instructions(List<OFInstruction> ins) {
    List<String> out = new ArrayList<>();
    for (OFInstruction i : ins) {
      if (i instanceof OFInstructionApplyActions a) {
        out.add(actions(a.getActions()));
      } else if (i instanceof OFInstructionWriteActions w) {
        out.add("write_actions(" + actions(w.getActions()) + ")");
      } else if (i instanceof OFInstructionGotoTable g) {
        out.add("goto_table:" + g.getTableId().getValue());
      } else if (i instanceof OFInstructionWriteMetadata w) {
        out.add("write_metadata:" + w.getMetadata() + "/" + w.getMetadataMask());
      } else {
        out.add(i.getType().name().toLowerCase());
      }
    }
    String s = String.join(",", out).replaceAll(",+", ",").replaceAll("^,|,$", "");
    return s.isEmpty() ? "drop" : s;
  }

  public static String actions(List<OFAction> acts) {
    List<String> out = new ArrayList<>();
    for (OFAction a : acts) {
      if (a instanceof OFActionOutput o) {
        OFPort p = o.getPort();
        out.add("output:" + (p.equals(OFPort.CONTROLLER) ? "CONTROLLER:" + o.getMaxLen() : p));
      } else if (a instanceof OFActionSetField s) {
        out.add(
            "set_field:" + s.getField().getValue() + "->" + s.getField().getMatchField().getName());
      } else if (a instanceof OFActionPushVlan v) {
        out.add("push_vlan:" + v.getEthertype());
      } else if (a instanceof OFActionPushMpls v) {
        out.add("push_mpls:" + v.getEthertype());
      } else if (a instanceof OFActionPopMpls v) {
        out.add("pop_mpls:" + v.getEthertype());
      } else if (a instanceof OFActionGroup g) {
        out.add("group:" + Integer.toUnsignedString(g.getGroup().getGroupNumber()));
      } else if (a instanceof net.uno.oneswitch.translate.SymmetricHash h) {
        out.add(h.toString());
      } else {
        out.add(a.getType().name().toLowerCase());
      }
    }
    return String.join(",", out);
  }
}
