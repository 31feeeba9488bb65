package net.uno.oneswitch.model;

/**
 * An ingress-only port of virtual port {@code vport} until {@code untilMs} (epoch ms): frames from
 * it are in_port=vport, while OneSwitch sends it nothing but frames tagged for the vport before it
 * left that were still on their way (Translator.leftPort; a deleted port's window ends at once:
 * OneSwitchCore.portStatus). Either a port that left the vport (remap, or an instance removed: the
 * leaving NF instance still emits packets it received before the switch-over), or, {@code
 * prepared}, one a coming remap will move the vport to (its rules are installed ahead, so the remap
 * only re-points the senders).
 */
public record Drain(int vport, VPort.Loc loc, long untilMs, boolean prepared) {
  /** A draining (leaving) port. */
  public Drain(int vport, VPort.Loc loc, long untilMs) {
    this(vport, loc, untilMs, false);
  }
}
