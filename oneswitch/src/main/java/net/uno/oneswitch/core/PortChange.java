package net.uno.oneswitch.core;

import net.uno.oneswitch.model.VPort;

/**
 * The result of a port-map change: whether it created a mapping (a new vport) or changed or kept
 * one, the vport before ({@code from}, null if new) and after ({@code to}, null if unmapped), how
 * many virtual rules' translation changed, and where its time went ({@code trace}, null if nothing
 * was applied).
 */
public record PortChange(
    boolean created, VPort from, VPort to, int rules, double durationMs, ApplyTrace trace) {
  /** Nothing changed: the request asked for what {@code v} already is. */
  static PortChange unchanged(VPort v) {
    return new PortChange(false, v, v, 0, 0, null);
  }
}
