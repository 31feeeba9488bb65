package net.uno.oneswitch.model;

import java.util.Collections;
import java.util.List;

/**
 * Virtual port {@code vport} realised by physical port {@code port} of switch {@code sw}, or, when
 * scaled out, by every physical port of {@code instances} (the first is always ({@code sw}, {@code
 * port}): the fields a single-instance caller reads stay meaningful). {@code weights}: the select
 * bucket weight of each instance (1..{@value #MAX_WEIGHT}, one per instance; null or empty: all 1).
 */
public record VPort(
    int vport, String sw, int port, String name, List<Loc> instances, List<Integer> weights) {
  /** The largest bucket weight (OpenFlow's 16-bit field). */
  public static final int MAX_WEIGHT = 0xffff;

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
    if (weights == null || weights.isEmpty()) {
      weights = Collections.nCopies(instances.size(), 1);
    } else {
      weights = List.copyOf(weights);
      if (weights.size() != instances.size()) {
        throw new IllegalArgumentException("one weight per instance");
      }
      for (int w : weights) {
        if (w < 1 || w > MAX_WEIGHT) {
          throw new IllegalArgumentException("a weight must be 1.." + MAX_WEIGHT);
        }
      }
    }
  }

  public VPort(int vport, String sw, int port, String name, List<Loc> instances) {
    this(vport, sw, port, name, instances, null);
  }

  public VPort(int vport, String sw, int port, String name) {
    this(vport, sw, port, name, null, null);
  }

  /** A vport served by {@code instances} (at least one), every bucket of weight 1. */
  public static VPort of(int vport, String name, List<Loc> instances) {
    return of(vport, name, instances, null);
  }

  /** A vport served by {@code instances} with bucket {@code weights} (null: all 1). */
  public static VPort of(int vport, String name, List<Loc> instances, List<Integer> weights) {
    Loc first = instances.get(0);
    return new VPort(vport, first.sw(), first.port(), name, instances, weights);
  }

  /** True if every instance has the same weight (the hash alone decides). */
  public boolean evenWeights() {
    return weights.stream().distinct().count() <= 1;
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
