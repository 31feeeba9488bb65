package net.uno.oneswitch.model;

import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFFlowModFlags;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;

/**
 * A flow entry of the virtual switch, as the controller wrote it. A value (equal when every field
 * is), immutable; its {@link #key()} is derived once (see {@link PhysRule}).
 */
public final class VirtualRule {
  private final int table;
  private final int priority;
  private final Match match;
  private final List<OFInstruction> instructions;
  private final long cookie;
  private final int idleTimeout;
  private final int hardTimeout;
  private final Set<OFFlowModFlags> flags;
  private final long installedMillis;
  private Key key;

  /** Identity of a flow entry in OpenFlow: table, priority and match. */
  public record Key(int table, int priority, String match) {
    // Written out: the generated record methods go through method handles (see PhysRule.Key).
    @Override
    public boolean equals(Object o) {
      return o instanceof Key k
          && k.table == table
          && k.priority == priority
          && k.match.equals(match);
    }

    @Override
    public int hashCode() {
      return (table * 31 + priority) * 31 + match.hashCode();
    }
  }

  public VirtualRule(
      int table,
      int priority,
      Match match,
      List<OFInstruction> instructions,
      long cookie,
      int idleTimeout,
      int hardTimeout,
      Set<OFFlowModFlags> flags,
      long installedMillis) {
    this.table = table;
    this.priority = priority;
    this.match = Objects.requireNonNull(match);
    this.instructions = Objects.requireNonNull(instructions);
    this.cookie = cookie;
    this.idleTimeout = idleTimeout;
    this.hardTimeout = hardTimeout;
    this.flags = Objects.requireNonNull(flags);
    this.installedMillis = installedMillis;
  }

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

  public long cookie() {
    return cookie;
  }

  public int idleTimeout() {
    return idleTimeout;
  }

  public int hardTimeout() {
    return hardTimeout;
  }

  public Set<OFFlowModFlags> flags() {
    return flags;
  }

  public long installedMillis() {
    return installedMillis;
  }

  /** Identity of the entry (computed once; a copy with other instructions or cookie shares it). */
  public Key key() {
    Key k = key;
    if (k == null) {
      k = new Key(table, priority, MatchKeys.of(match));
      key = k; // racy but benign: every thread computes the same value
    }
    return k;
  }

  public VirtualRule withInstructions(List<OFInstruction> ins) {
    return withKey(
        new VirtualRule(
            table, priority, match, ins, cookie, idleTimeout, hardTimeout, flags, installedMillis));
  }

  public VirtualRule withCookie(long c) {
    return withKey(
        new VirtualRule(
            table,
            priority,
            match,
            instructions,
            c,
            idleTimeout,
            hardTimeout,
            flags,
            installedMillis));
  }

  private VirtualRule withKey(VirtualRule r) {
    r.key = key; // same table, priority and match
    return r;
  }

  @Override
  public boolean equals(Object o) {
    return o == this
        || o instanceof VirtualRule r
            && r.table == table
            && r.priority == priority
            && r.cookie == cookie
            && r.idleTimeout == idleTimeout
            && r.hardTimeout == hardTimeout
            && r.installedMillis == installedMillis
            && r.match.equals(match)
            && r.instructions.equals(instructions)
            && r.flags.equals(flags);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        table,
        priority,
        match,
        instructions,
        cookie,
        idleTimeout,
        hardTimeout,
        flags,
        installedMillis);
  }

  @Override
  public String toString() {
    return "VirtualRule[table="
        + table
        + ", priority="
        + priority
        + ", match="
        + match
        + ", instructions="
        + instructions
        + ", cookie="
        + cookie
        + ", flags="
        + flags
        + "]";
  }
}
