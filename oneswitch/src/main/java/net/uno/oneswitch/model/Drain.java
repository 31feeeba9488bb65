package net.uno.oneswitch.model;

/**
 * A physical port that left virtual port {@code vport} (remap, or an instance removed) and stays an
 * ingress-only port of it until {@code untilMs} (epoch ms): frames the leaving NF instance still
 * emits (packets it received before the switch-over) are in_port=vport, while OneSwitch never sends
 * anything to it.
 */
public record Drain(int vport, VPort.Loc loc, long untilMs) {}
