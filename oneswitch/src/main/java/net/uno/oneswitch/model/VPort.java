package net.uno.oneswitch.model;

/** Virtual port {@code vport} realised by physical port {@code port} of switch {@code sw}. */
public record VPort(int vport, String sw, int port, String name) {}
