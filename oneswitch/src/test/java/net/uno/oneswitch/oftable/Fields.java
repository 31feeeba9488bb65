package net.uno.oneswitch.oftable;

import java.util.Map;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.protocol.match.MatchFields;
import org.projectfloodlight.openflow.types.ArpOpcode;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.ICMPv4Code;
import org.projectfloodlight.openflow.types.ICMPv4Type;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.IPv6Address;
import org.projectfloodlight.openflow.types.IPv6FlowLabel;
import org.projectfloodlight.openflow.types.IpDscp;
import org.projectfloodlight.openflow.types.IpEcn;
import org.projectfloodlight.openflow.types.IpProtocol;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFBooleanValue;
import org.projectfloodlight.openflow.types.OFMetadata;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.TransportPort;
import org.projectfloodlight.openflow.types.U32;
import org.projectfloodlight.openflow.types.U8;
import org.projectfloodlight.openflow.types.VlanPcp;

/**
 * The OXM fields of OpenFlow 1.3 as a switch reads and writes them on a {@link Frame}: their values
 * as bits, their prerequisites (OpenFlow 1.3 section 7.2.3.6, as OVS checks them when a flow is
 * added), and which header each lives in. IPv6 addresses are two 64-bit halves.
 */
final class Fields {
  private Fields() {}

  /** Pipeline fields that are no header of the frame. */
  record Pipeline(long inPort, long metadata, long tunnelId) {
    Pipeline(long inPort, long metadata) {
      this(inPort, metadata, 0);
    }
  }

  /** The bits of an openflowj field value (one long, or two for 128 bits). */
  static long[] bits(Object v) {
    if (v instanceof OFPort p) {
      return one(p.getPortNumber() & 0xffffffffL);
    } else if (v instanceof OFMetadata m) {
      return one(m.getValue().getValue());
    } else if (v instanceof MacAddress m) {
      return one(m.getLong());
    } else if (v instanceof EthType t) {
      return one(t.getValue());
    } else if (v instanceof OFVlanVidMatch m) {
      return one(m.getRawVid() & 0x1fff);
    } else if (v instanceof VlanPcp p) {
      return one(p.getValue());
    } else if (v instanceof IpDscp d) {
      return one(d.getDscpValue());
    } else if (v instanceof IpEcn e) {
      return one(e.getEcnValue());
    } else if (v instanceof IpProtocol p) {
      return one(p.getIpProtocolNumber());
    } else if (v instanceof IPv4Address a) {
      return one(a.getInt() & 0xffffffffL);
    } else if (v instanceof IPv6Address a) {
      java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(a.getBytes());
      return new long[] {b.getLong(), b.getLong()};
    } else if (v instanceof IPv6FlowLabel l) {
      return one(l.getIPv6FlowLabelValue());
    } else if (v instanceof TransportPort p) {
      return one(p.getPort());
    } else if (v instanceof ICMPv4Type t) {
      return one(t.getType());
    } else if (v instanceof ICMPv4Code c) {
      return one(c.getCode());
    } else if (v instanceof ArpOpcode o) {
      return one(o.getOpcode());
    } else if (v instanceof org.projectfloodlight.openflow.types.U64 u) {
      return one(u.getValue());
    } else if (v instanceof U32 u) {
      return one(u.getValue());
    } else if (v instanceof U8 u) {
      return one(u.getValue());
    } else if (v instanceof OFBooleanValue b) {
      return one(b.getValue() ? 1 : 0);
    }
    throw new UnsupportedOperationException("field value " + v.getClass().getSimpleName());
  }

  private static long[] one(long v) {
    return new long[] {v};
  }

  private static final Map<MatchFields, String> SCALAR =
      Map.ofEntries(
          Map.entry(MatchFields.ETH_DST, "eth_dst"),
          Map.entry(MatchFields.ETH_SRC, "eth_src"),
          Map.entry(MatchFields.IP_DSCP, "ip_dscp"),
          Map.entry(MatchFields.IP_ECN, "ip_ecn"),
          Map.entry(MatchFields.IP_PROTO, "ip_proto"),
          Map.entry(MatchFields.IPV4_SRC, "ipv4_src"),
          Map.entry(MatchFields.IPV4_DST, "ipv4_dst"),
          Map.entry(MatchFields.TCP_SRC, "tp_src"),
          Map.entry(MatchFields.TCP_DST, "tp_dst"),
          Map.entry(MatchFields.UDP_SRC, "tp_src"),
          Map.entry(MatchFields.UDP_DST, "tp_dst"),
          Map.entry(MatchFields.SCTP_SRC, "tp_src"),
          Map.entry(MatchFields.SCTP_DST, "tp_dst"),
          Map.entry(MatchFields.ICMPV4_TYPE, "icmp_type"),
          Map.entry(MatchFields.ICMPV4_CODE, "icmp_code"),
          Map.entry(MatchFields.ICMPV6_TYPE, "icmp_type"),
          Map.entry(MatchFields.ICMPV6_CODE, "icmp_code"),
          Map.entry(MatchFields.ARP_OP, "arp_op"),
          Map.entry(MatchFields.ARP_SPA, "arp_spa"),
          Map.entry(MatchFields.ARP_TPA, "arp_tpa"),
          Map.entry(MatchFields.ARP_SHA, "arp_sha"),
          Map.entry(MatchFields.ARP_THA, "arp_tha"),
          Map.entry(MatchFields.IPV6_FLABEL, "ipv6_flabel"));

  /** True if {@code fr} has the header that field {@code id} lives in (its prerequisites hold). */
  static boolean present(Frame fr, MatchFields id) {
    return switch (id) {
      case IN_PORT, METADATA, TUNNEL_ID, ETH_DST, ETH_SRC, ETH_TYPE, VLAN_VID -> true;
      case VLAN_PCP -> !fr.vlans.isEmpty();
      case IP_DSCP, IP_ECN, IP_PROTO -> fr.ip();
      case IPV4_SRC, IPV4_DST -> fr.l3(0x0800);
      case IPV6_SRC, IPV6_DST, IPV6_FLABEL -> fr.l3(0x86dd);
      case TCP_SRC, TCP_DST -> fr.l4(6);
      case UDP_SRC, UDP_DST -> fr.l4(17);
      case SCTP_SRC, SCTP_DST -> fr.l4(132);
      case ICMPV4_TYPE, ICMPV4_CODE -> fr.l3(0x0800) && fr.l4(1);
      case ICMPV6_TYPE, ICMPV6_CODE -> fr.l3(0x86dd) && fr.l4(58);
      case ARP_OP, ARP_SPA, ARP_TPA, ARP_SHA, ARP_THA -> fr.l3(0x0806);
      case MPLS_LABEL, MPLS_TC, MPLS_BOS -> !fr.mpls.isEmpty();
      default -> throw new UnsupportedOperationException("field " + id);
    };
  }

  /** The value of field {@code id} in {@code fr}, or null if the frame does not have it. */
  static long[] read(Frame fr, MatchFields id, Pipeline p) {
    if (!present(fr, id)) {
      return null;
    }
    switch (id) {
      case IN_PORT:
        return one(p.inPort());
      case METADATA:
        return one(p.metadata());
      case TUNNEL_ID:
        return one(p.tunnelId());
      case ETH_TYPE:
        return one(fr.ethType());
      case VLAN_VID:
        return one(fr.vlans.isEmpty() ? 0 : 0x1000 | fr.vlans.get(0).vid());
      case VLAN_PCP:
        return one(fr.vlans.get(0).pcp());
      case MPLS_LABEL:
        return one(fr.mpls.get(0).label());
      case MPLS_TC:
        return one(fr.mpls.get(0).tc());
      case MPLS_BOS:
        return one(fr.mpls.get(0).bos() ? 1 : 0);
      case IPV6_SRC:
      case IPV6_DST:
        String n = id == MatchFields.IPV6_SRC ? "ipv6_src" : "ipv6_dst";
        return new long[] {fr.f.get(n + "_hi"), fr.f.get(n + "_lo")};
      default:
        Long v = fr.f.get(SCALAR.get(id));
        return v == null ? null : one(v);
    }
  }

  /**
   * Sets field {@code id} of {@code fr} to {@code v} (set_field). Returns false, changing nothing,
   * if the frame does not have the field's header: OVS sets a field only if the packet has it.
   */
  static boolean write(Frame fr, MatchFields id, long[] v) {
    if (id == MatchFields.VLAN_VID) {
      if (fr.vlans.isEmpty()) {
        // OVS refuses such a rule when it is added (set_field vlan_vid needs a VLAN header).
        throw new IllegalStateException("set_field vlan_vid on a frame without VLAN: " + fr);
      }
      Frame.Vlan o = fr.vlans.get(0);
      fr.vlans.set(0, new Frame.Vlan(o.tpid(), o.pcp(), (int) (v[0] & 0xfff)));
      return true;
    }
    if (id == MatchFields.IN_PORT || id == MatchFields.METADATA || id == MatchFields.ETH_TYPE) {
      throw new UnsupportedOperationException("set_field " + id);
    }
    if (!present(fr, id)) {
      return false;
    }
    switch (id) {
      case VLAN_PCP -> {
        Frame.Vlan o = fr.vlans.get(0);
        fr.vlans.set(0, new Frame.Vlan(o.tpid(), (int) v[0] & 7, o.vid()));
      }
      case MPLS_LABEL, MPLS_TC, MPLS_BOS -> {
        Frame.Mpls o = fr.mpls.get(0);
        fr.mpls.set(
            0,
            switch (id) {
              case MPLS_LABEL -> new Frame.Mpls((int) v[0], o.tc(), o.bos(), o.ttl());
              case MPLS_TC -> new Frame.Mpls(o.label(), (int) v[0], o.bos(), o.ttl());
              default -> new Frame.Mpls(o.label(), o.tc(), v[0] != 0, o.ttl());
            });
      }
      case IPV6_SRC, IPV6_DST -> {
        String n = id == MatchFields.IPV6_SRC ? "ipv6_src" : "ipv6_dst";
        fr.f.put(n + "_hi", v[0]);
        fr.f.put(n + "_lo", v[1]);
      }
      default -> fr.f.put(SCALAR.get(id), v[0]);
    }
    return true;
  }

  /**
   * The OpenFlow 1.3 prerequisites of each field of {@code m}: the match must state them (OVS
   * refuses the entry otherwise, BAD_PREREQ). openflowj hides a field whose prerequisites are not
   * in the match, so the raw OXM list is compared with the fields it shows.
   */
  static void checkPrerequisites(Match m) {
    java.util.Set<MatchFields> shown = new java.util.HashSet<>();
    m.getMatchFields().forEach(mf -> shown.add(mf.id));
    if (m instanceof org.projectfloodlight.openflow.protocol.OFMatchV3 v3) {
      for (org.projectfloodlight.openflow.protocol.oxm.OFOxm<?> x : v3.getOxmList()) {
        if (!shown.contains(x.getMatchField().id)) {
          throw new IllegalArgumentException("BAD_PREREQ: " + x.getMatchField().id + " in " + m);
        }
      }
    }
    for (MatchField<?> mf : m.getMatchFields()) {
      MatchFields id = mf.id;
      int eth = m.isExact(MatchField.ETH_TYPE) ? m.get(MatchField.ETH_TYPE).getValue() : -1;
      int proto =
          m.isExact(MatchField.IP_PROTO) ? m.get(MatchField.IP_PROTO).getIpProtocolNumber() : -1;
      boolean ok =
          switch (id) {
            case VLAN_PCP ->
                m.isExact(MatchField.VLAN_VID) && m.get(MatchField.VLAN_VID).getRawVid() != 0
                    || m.isPartiallyMasked(MatchField.VLAN_VID);
            case IP_DSCP, IP_ECN, IP_PROTO -> eth == 0x0800 || eth == 0x86dd;
            case IPV4_SRC, IPV4_DST -> eth == 0x0800;
            case IPV6_SRC, IPV6_DST, IPV6_FLABEL -> eth == 0x86dd;
            case TCP_SRC, TCP_DST -> proto == 6;
            case UDP_SRC, UDP_DST -> proto == 17;
            case SCTP_SRC, SCTP_DST -> proto == 132;
            case ICMPV4_TYPE, ICMPV4_CODE -> eth == 0x0800 && proto == 1;
            case ICMPV6_TYPE, ICMPV6_CODE -> eth == 0x86dd && proto == 58;
            case ARP_OP, ARP_SPA, ARP_TPA, ARP_SHA, ARP_THA -> eth == 0x0806;
            case MPLS_LABEL, MPLS_TC, MPLS_BOS -> eth == 0x8847 || eth == 0x8848;
            default -> true;
          };
      if (!ok) {
        throw new IllegalArgumentException("BAD_PREREQ: " + id + " in " + m);
      }
    }
  }
}
