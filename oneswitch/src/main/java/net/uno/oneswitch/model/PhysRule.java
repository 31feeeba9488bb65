package net.uno.oneswitch.model;

import java.util.List;
import java.util.Objects;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;

/**
 * A flow entry OneSwitch wants on physical switch {@code sw}. A value (equal when every field is),
 * immutable; its {@link #key()} is derived once (the canonical match text costs a lookup by value
 * or a text build, and a rule's key is asked for several times per flow-mod).
 */
public final class PhysRule {
  private final String sw;
  private final int table;
  private final int priority;
  private final Match match;
  private final List<OFInstruction> instructions;
  private final boolean late;
  private Key key;

  /** Identity on the physical switch. */
  public record Key(String sw, int table, int priority, String match) {
    // Written out: the generated record methods go through method handles, which showed as ~10 % of
    // OneSwitch's core thread in pipelined installs (keys are looked up several times per
    // flow-mod).
    @Override
    public boolean equals(Object o) {
      return o instanceof Key k
          && k.table == table
          && k.priority == priority
          && k.sw.equals(sw)
          && k.match.equals(match);
    }

    @Override
    public int hashCode() {
      return ((sw.hashCode() * 31 + table) * 31 + priority) * 31 + match.hashCode();
    }
  }

  public PhysRule(
      String sw, int table, int priority, Match match, List<OFInstruction> instructions) {
    this.sw = Objects.requireNonNull(sw);
    this.table = table;
    this.priority = priority;
    this.match = Objects.requireNonNull(match);
    this.instructions = Objects.requireNonNull(instructions);
    this.late = false;
  }

  private PhysRule(PhysRule r, boolean late) {
    this.sw = r.sw;
    this.table = r.table;
    this.priority = r.priority;
    this.match = r.match;
    this.instructions = r.instructions;
    this.late = late;
  }

  /**
   * This rule, added in the modify phase instead of the make phase when it is new (a handoff rule,
   * which sends packets to rules the make phase installs on another switch). A planning hint: not
   * part of the rule's value.
   */
  public PhysRule late() {
    return new PhysRule(this, true);
  }

  /** True if this rule is added in the modify phase (see {@link #late()}). */
  public boolean isLate() {
    return late;
  }

  public String sw() {
    return sw;
  }

  public int table() {
    return table;
  }

  public int priority() {
    return priority;
  }

  public Match match() {
    return match;
  }

  public List<OFInstruction> instructions() {
    return instructions;
  }

  /** Identity on the physical switch (computed once). */
  public Key key() {
    Key k = key;
    if (k == null) {
      k = new Key(sw, table, priority, MatchKeys.of(match));
      key = k; // racy but benign: every thread computes the same value
    }
    return k;
  }

  @Override
  public boolean equals(Object o) {
    return o == this
        || o instanceof PhysRule p
            && p.table == table
            && p.priority == priority
            && p.sw.equals(sw)
            && p.match.equals(match)
            && p.instructions.equals(instructions);
  }

  @Override
  public int hashCode() {
    return Objects.hash(sw, table, priority, match, instructions);
  }

  @Override
  public String toString() {
    return "PhysRule[sw="
        + sw
        + ", table="
        + table
        + ", priority="
        + priority
        + ", match="
        + match
        + ", instructions="
        + instructions
        + "]";
  }
}
