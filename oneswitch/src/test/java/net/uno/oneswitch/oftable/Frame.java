package net.uno.oneswitch.oftable;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * An Ethernet frame as a switch parses it: Ethernet addresses, a stack of VLAN headers (outermost
 * first), a stack of MPLS label entries (outermost first) after them, and the L3/L4 header fields
 * of the payload, whose ethertype is {@link #l3Type}. Two frames are equal when every header field
 * and the payload are: the same bytes on the wire. Mutable: a switch works on its own copy.
 *
 * <p>The visible ethertype ({@link #ethType()}) is the MPLS one while labels are on, else the
 * payload's. L3 and L4 fields exist only while no label covers them, as for a real parser.
 */
public final class Frame {
  /** A VLAN header: TPID, priority, id. */
  public record Vlan(int tpid, int pcp, int vid) {
    @Override
    public String toString() {
      return String.format("%04x/pcp%d/vid%d", tpid, pcp, vid);
    }
  }

  /** An MPLS label stack entry. */
  public record Mpls(int label, int tc, boolean bos, int ttl) {
    @Override
    public String toString() {
      return "L" + label + "/tc" + tc + (bos ? "/bos" : "") + "/ttl" + ttl;
    }
  }

  final List<Vlan> vlans = new ArrayList<>();
  final List<Mpls> mpls = new ArrayList<>();

  /** The ethertype of an MPLS frame (0x8847 or 0x8848) while {@link #mpls} is not empty. */
  int mplsType = 0x8847;

  /** The ethertype of the payload after the VLAN headers and labels. */
  int l3Type;

  /** Scalar header fields by name (eth_dst, ipv4_src, tp_src, ...). */
  final TreeMap<String, Long> f = new TreeMap<>();

  String payload = "";

  private Frame() {}

  /** An untagged frame of ethertype {@code type} between two MAC addresses (as longs). */
  public static Frame eth(long src, long dst, int type) {
    Frame fr = new Frame();
    fr.f.put("eth_src", src);
    fr.f.put("eth_dst", dst);
    fr.l3Type = type;
    return fr;
  }

  /** An IPv4 frame (protocol {@code proto}, TTL 64). */
  public static Frame ipv4(long src, long dst, int ipSrc, int ipDst, int proto) {
    Frame fr = eth(src, dst, 0x0800);
    fr.f.put("ip_proto", (long) proto);
    fr.f.put("ip_dscp", 0L);
    fr.f.put("ip_ecn", 0L);
    fr.f.put("ip_ttl", 64L);
    fr.f.put("ipv4_src", ipSrc & 0xffffffffL);
    fr.f.put("ipv4_dst", ipDst & 0xffffffffL);
    return fr;
  }

  /** A TCP (6), UDP (17) or SCTP (132) IPv4 frame with ports. */
  public static Frame l4(long src, long dst, int ipSrc, int ipDst, int proto, int sp, int dp) {
    Frame fr = ipv4(src, dst, ipSrc, ipDst, proto);
    fr.f.put("tp_src", (long) sp);
    fr.f.put("tp_dst", (long) dp);
    return fr;
  }

  /** An ICMPv4 frame. */
  public static Frame icmp(long src, long dst, int ipSrc, int ipDst, int type, int code) {
    Frame fr = ipv4(src, dst, ipSrc, ipDst, 1);
    fr.f.put("icmp_type", (long) type);
    fr.f.put("icmp_code", (long) code);
    return fr;
  }

  /** An ARP frame. */
  public static Frame arp(long sha, int op, int spa, int tpa) {
    Frame fr = eth(sha, op == 1 ? 0xffffffffffffL : 0x020000000099L, 0x0806);
    fr.f.put("arp_op", (long) op);
    fr.f.put("arp_sha", sha);
    fr.f.put("arp_tha", op == 1 ? 0L : 0x020000000099L);
    fr.f.put("arp_spa", spa & 0xffffffffL);
    fr.f.put("arp_tpa", tpa & 0xffffffffL);
    return fr;
  }

  /** This frame with a VLAN header added inside the existing ones (as it came from the wire). */
  public Frame tagged(int tpid, int pcp, int vid) {
    Frame c = copy();
    c.vlans.add(new Vlan(tpid, pcp, vid));
    return c;
  }

  /** This frame under an MPLS label (bottom of stack): an MPLS frame from the wire. */
  public Frame labelled(int label, int ttl) {
    Frame c = copy();
    c.mpls.add(new Mpls(label, 0, c.mpls.isEmpty(), ttl));
    return c;
  }

  /** This frame with payload text {@code p} (tells frames apart). */
  public Frame payload(String p) {
    Frame c = copy();
    c.payload = p;
    return c;
  }

  public Frame copy() {
    Frame c = new Frame();
    c.vlans.addAll(vlans);
    c.mpls.addAll(mpls);
    c.mplsType = mplsType;
    c.l3Type = l3Type;
    c.f.putAll(f);
    c.payload = payload;
    return c;
  }

  /** The ethertype a switch matches as eth_type. */
  public int ethType() {
    return mpls.isEmpty() ? l3Type : mplsType;
  }

  /** True if the L3 header is visible and of type {@code type}. */
  boolean l3(int type) {
    return mpls.isEmpty() && l3Type == type;
  }

  boolean ip() {
    return l3(0x0800) || l3(0x86dd);
  }

  /** True if the L4 header of IP protocol {@code proto} is visible. */
  boolean l4(int proto) {
    return ip() && Long.valueOf(proto).equals(f.get("ip_proto"));
  }

  public List<Vlan> vlans() {
    return List.copyOf(vlans);
  }

  public List<Mpls> mpls() {
    return List.copyOf(mpls);
  }

  /** A header field by name, or null if the frame has none. */
  public Long field(String name) {
    return f.get(name);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Frame fr && toString().equals(fr.toString());
  }

  @Override
  public int hashCode() {
    return toString().hashCode();
  }

  @Override
  public String toString() {
    StringBuilder b = new StringBuilder();
    b.append(String.format("%012x>%012x", f.get("eth_src"), f.get("eth_dst")));
    for (Vlan v : vlans) {
      b.append(' ').append(v);
    }
    if (!mpls.isEmpty()) {
      b.append(String.format(" %04x", mplsType)).append(mpls);
    }
    b.append(String.format(" %04x", l3Type));
    for (Map.Entry<String, Long> e : f.entrySet()) {
      if (!e.getKey().startsWith("eth_")) {
        b.append(' ').append(e.getKey()).append('=').append(Long.toHexString(e.getValue()));
      }
    }
    if (!payload.isEmpty()) {
      b.append(" '").append(payload).append('\'');
    }
    return b.toString();
  }
}
