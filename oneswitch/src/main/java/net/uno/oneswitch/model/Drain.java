package net.uno.oneswitch.model;

/**
 * An ingress-only port of virtual port {@code vport} until {@code untilMs} (epoch ms): frames from
 * it are in_port=vport, while OneSwitch sends it nothing but frames tagged for the vport before it
 * left that were still on their way (Translator.leftPort; a deleted port's window ends at once:
 * OneSwitchCore.portStatus). Either a port that left the vport (remap, or an instance removed: the
 * leaving NF instance still emits packets it received before the switch-over), or, {@code
 * prepared}, one a coming remap will move the vport to (its rules are installed ahead, so the remap
 * only re-points the senders). {@code slot}: the instance slot (index in the vport's instances,
 * whose flow-id tag frames sent to it carry) a leaving port held, so that such frames still on
 * their way after a shrink reach it (Dispatch), not another instance.
 */
public record Drain(int vport, VPort.Loc loc, long untilMs, boolean prepared, int slot) {
  /** Not known which instance slot the port held (a prepared port, or a drain made without it). */
  public static final int NO_SLOT = -1;

  /** A port with no slot ({@link #NO_SLOT}). */
  public Drain(int vport, VPort.Loc loc, long untilMs, boolean prepared) {
    this(vport, loc, untilMs, prepared, NO_SLOT);
  }

  /** A draining (leaving) port. */
  public Drain(int vport, VPort.Loc loc, long untilMs) {
    this(vport, loc, untilMs, false);
  }
}
