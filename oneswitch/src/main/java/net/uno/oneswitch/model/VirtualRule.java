package net.uno.oneswitch.model;

import java.util.List;
import java.util.Set;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;

/** A flow entry of the virtual switch, as the controller wrote it. */
public record VirtualRule(
    int table,
    int priority,
    Match match,
    List<OFInstruction> instructions,
    long cookie,
    int idleTimeout,
    int hardTimeout,
    Set<OFFlowModFlags> flags,
    long installedMillis) {

  /** Identity of a flow entry in OpenFlow: table, priority and match. */
  public record Key(int table, int priority, String match) {}

  /**
   * The rule a FLOW_MOD (ADD) writes into virtual table {@code table}, installed at {@code nowMs}.
   */
  public static VirtualRule of(OFFlowMod fm, int table, long nowMs) {
    return new VirtualRule(
        table,
        fm.getPriority(),
        fm.getMatch(),
        fm.getInstructions(),
        fm.getCookie().getValue(),
        fm.getIdleTimeout(),
        fm.getHardTimeout(),
        Set.copyOf(fm.getFlags()),
        nowMs);
  }

  public Key key() {
    return new Key(table, priority, MatchKeys.of(match));
  }

  public VirtualRule withInstructions(List<OFInstruction> ins) {
    return new VirtualRule(
        table, priority, match, ins, cookie, idleTimeout, hardTimeout, flags, installedMillis);
  }

  public VirtualRule withCookie(long c) {
    return new VirtualRule(
        table, priority, match, instructions, c, idleTimeout, hardTimeout, flags, installedMillis);
  }
}
