package net.uno.oneswitch.core;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupModCommand;
import org.projectfloodlight.openflow.protocol.OFMessage;

/**
 * A controller's bundle committed all or nothing. First a trial: every message is applied to the
 * virtual switch in order (translated, nothing sent), then rolled back; one refused message refuses
 * the bundle with nothing changed. Then for real: the messages are applied again with the physical
 * changes held, and planned as one, so each switch gets the whole bundle in make-before-break order
 * (adds, modifies, then deletes). A switch's later refusal of any part rolls back the whole bundle
 * (its messages share the commit's undo). Core thread only.
 */
public final class Bundles {
  private final FlowMods flowMods;
  private final GroupMods groupMods;
  private final PhysicalSync sync;
  private final Refusals refusals;

  Bundles(FlowMods flowMods, GroupMods groupMods, PhysicalSync sync, Refusals refusals) {
    this.flowMods = flowMods;
    this.groupMods = groupMods;
    this.sync = sync;
    this.refusals = refusals;
  }

  /** Message {@code index} of a bundle was refused with {@code error}; nothing changed. */
  public static final class Refused extends Exception {
    private static final long serialVersionUID = 1L;
    private final int index;
    private final OfError error;

    Refused(int index, OfError error) {
      super(error.getMessage());
      this.index = index;
      this.error = error;
    }

    public int index() {
      return index;
    }

    public OfError error() {
      return error;
    }
  }

  /** Whether a bundle may hold {@code m}: flow-mods, and group-mods other than DELETE. */
  public static boolean supported(OFMessage m) {
    return m instanceof OFFlowMod
        || (m instanceof OFGroupMod g && g.getCommand() != OFGroupModCommand.DELETE);
  }

  /**
   * Applies {@code msgs} all or nothing; {@code origin} (the commit) gets a switch's later refusal.
   * Completes once the physical messages are sent (a barrier then confirms them).
   */
  public CompletableFuture<Void> commit(List<OFMessage> msgs, Origin origin) throws Refused {
    run(msgs, origin, true);
    return run(msgs, origin, false);
  }

  private CompletableFuture<Void> run(List<OFMessage> msgs, Origin origin, boolean trial)
      throws Refused {
    sync.hold();
    refusals.begin(origin);
    flowMods.trial(trial);
    Refused refused = null;
    CompletableFuture<Void> sent;
    try {
      for (int i = 0; i < msgs.size() && refused == null; i++) {
        try {
          apply(msgs.get(i));
        } catch (OfError e) {
          refused = new Refused(i, e);
        }
      }
      if (trial || refused != null) {
        refusals.rollBackCurrent();
      }
    } finally {
      flowMods.trial(false);
      try {
        sent = sync.release(); // after a rollback: the little a re-translation changed, if anything
      } finally {
        refusals.end();
      }
    }
    if (refused != null) {
      throw refused;
    }
    return sent;
  }

  private void apply(OFMessage m) throws OfError {
    if (m instanceof OFFlowMod fm) {
      flowMods.flowMod(fm);
    } else {
      groupMods.groupMod((OFGroupMod) m);
    }
  }
}
