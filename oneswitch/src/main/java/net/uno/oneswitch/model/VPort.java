package net.uno.oneswitch.model;

import java.util.List;

/**
 * Virtual port {@code vport} realised by physical port {@code port} of switch {@code sw}, or, when
 * scaled out, by every physical port of {@code instances} (the first is always ({@code sw}, {@code
 * port}): the fields a single-instance caller reads stay meaningful).
 */
public record VPort(int vport, String sw, int port, String name, List<Loc> instances) {
  /** One physical port serving a virtual port. */
  public record Loc(String sw, int port) {}

  public VPort {
    if (instances == null || instances.isEmpty()) {
      instances = List.of(new Loc(sw, port));
    } else {
      instances = List.copyOf(instances);
      if (!instances.get(0).equals(new Loc(sw, port))) {
        throw new IllegalArgumentException("the first instance must be (sw, port)");
      }
    }
  }

  public VPort(int vport, String sw, int port, String name) {
    this(vport, sw, port, name, null);
  }

  /** A vport served by {@code instances} (at least one). */
  public static VPort of(int vport, String name, List<Loc> instances) {
    Loc first = instances.get(0);
    return new VPort(vport, first.sw(), first.port(), name, instances);
  }

  /** Number of instances. */
  public int k() {
    return instances.size();
  }

  /** True if any instance is on switch {@code s}. */
  public boolean on(String s) {
    return instances.stream().anyMatch(l -> l.sw().equals(s));
  }

  /** True if (s, p) is one of its instances. */
  public boolean has(String s, int p) {
    return instances.stream().anyMatch(l -> l.sw().equals(s) && l.port() == p);
  }
}
