package net.uno.oneswitch.model;

import java.util.List;
import java.util.Set;
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
