package net.uno.oneswitch.model;

import java.util.List;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;

/** A flow entry OneSwitch wants on physical switch {@code sw}. */
public record PhysRule(
    String sw, int table, int priority, Match match, List<OFInstruction> instructions) {

  /** Identity on the physical switch. */
  public record Key(String sw, int table, int priority, String match) {}

  public Key key() {
    return new Key(sw, table, priority, MatchKeys.of(match));
  }
}
