package net.uno.oneswitch.core;

import static net.uno.oneswitch.translate.Fixtures.F;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import net.uno.oneswitch.oftable.Frame;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.IPv4AddressWithMask;
import org.projectfloodlight.openflow.types.IpProtocol;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFMetadata;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.OFVlanVidMatchWithMask;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.TransportPort;
import org.projectfloodlight.openflow.types.U32;
import org.projectfloodlight.openflow.types.U64;

/**
 * Seeded random rule sets, groups and frames over small value pools (so that rules and frames
 * meet), for the property-style equivalence checks. Rule families: L2 and in_port forwarding, IP
 * prefixes and L4 ports, VLAN matches with push/pop/set, MPLS push and pop, goto chains with
 * write-metadata and metadata matches, action sets (output, FLOOD, group, set_field, push,
 * clear-actions), reserved outputs (FLOOD, ALL, CONTROLLER, IN_PORT) and the controller's ALL,
 * SELECT and INDIRECT groups. Each rule is valid for OVS as written (a VLAN field is set or popped
 * only where the rule knows a VLAN header is there); whether OneSwitch can carry it is up to
 * OneSwitch (a refusal is fine, a difference is not). Priorities are distinct per table: equal
 * priorities that overlap are undefined in OpenFlow.
 */
final class RandomRules {
  static final int TABLES = 4;
  static final long[] MACS = {0x020000000001L, 0x020000000002L, 0x0200000000aaL};
  static final int[] VIDS = {10, 20, 30};
  static final int[] TP = {53, 54, 80};
  static final int[] GROUPS = {1, 2, 3, 4};

  private final Random rnd;
  private final int vports;
  private final int wireVlans;
  private final Map<Integer, List<Integer>> usedPrio = new HashMap<>();

  RandomRules(long seed, int vports, int wireVlans) {
    this.rnd = new Random(seed);
    this.vports = vports;
    this.wireVlans = wireVlans;
  }

  private <T> T pick(List<T> l) {
    return l.get(rnd.nextInt(l.size()));
  }

  private int pick(int[] a) {
    return a[rnd.nextInt(a.length)];
  }

  private long pick(long[] a) {
    return a[rnd.nextInt(a.length)];
  }

  private boolean chance(double p) {
    return rnd.nextDouble() < p;
  }

  private int vport() {
    return 1 + rnd.nextInt(vports);
  }

  /** The controller's groups: an ALL, a SELECT, an INDIRECT and one more of either kind. */
  List<OFGroupMod> groups() {
    List<OFGroupMod> out = new ArrayList<>();
    for (int id : GROUPS) {
      OFGroupType type =
          switch (id) {
            case 1 -> OFGroupType.ALL;
            case 2 -> OFGroupType.SELECT;
            case 3 -> OFGroupType.INDIRECT;
            default -> chance(0.5) ? OFGroupType.ALL : OFGroupType.SELECT;
          };
      int n = type == OFGroupType.INDIRECT ? 1 : 2 + rnd.nextInt(2);
      List<OFBucket> buckets = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        List<OFAction> a = new ArrayList<>();
        if (chance(0.3)) {
          a.add(F.actions().setField(F.oxms().ethDst(MacAddress.of(pick(MACS)))));
        }
        a.add(out(vport()));
        buckets.add(
            F.buildBucket()
                .setActions(a)
                .setWatchGroup(OFGroup.ANY)
                .setWatchPort(OFPort.ANY)
                .build());
      }
      out.add(
          F.buildGroupAdd()
              .setGroup(OFGroup.of(id))
              .setGroupType(type)
              .setBuckets(buckets)
              .build());
    }
    return out;
  }

  private static OFAction out(int p) {
    return F.actions().output(OFPort.of(p), 0xffff);
  }

  private int priority(int table) {
    List<Integer> used = usedPrio.computeIfAbsent(table, k -> new ArrayList<>());
    while (true) {
      int p = 1 + rnd.nextInt(1000);
      if (!used.contains(p)) {
        used.add(p);
        return p;
      }
    }
  }

  /** What a rule's match tells about the frame, and what its actions did to it so far. */
  private static final class State {
    boolean vlan; // a VLAN header is certainly there
    boolean noVlan; // certainly none
    int eth = -1; // ethertype, if known
    int proto = -1;
    boolean mpls;
  }

  /** One random ADD. */
  OFFlowMod rule() {
    int table = chance(0.5) ? 0 : rnd.nextInt(TABLES);
    State st = new State();
    Match.Builder m = F.buildMatch();
    if (chance(0.55)) {
      m.setExact(MatchField.IN_PORT, OFPort.of(vport()));
    }
    double v = rnd.nextDouble();
    if (v < 0.15) {
      m.setExact(MatchField.VLAN_VID, OFVlanVidMatch.NONE);
      st.noVlan = true;
    } else if (v < 0.25) {
      m.setMasked(
          MatchField.VLAN_VID,
          OFVlanVidMatchWithMask.of(OFVlanVidMatch.PRESENT, OFVlanVidMatch.PRESENT));
      st.vlan = true;
    } else if (v < 0.4) {
      m.setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(pick(VIDS)));
      st.vlan = true;
    }
    double e = rnd.nextDouble();
    if (e < 0.45) {
      st.eth = 0x0800;
      m.setExact(MatchField.ETH_TYPE, EthType.IPv4);
      if (chance(0.5)) {
        int ip = pick(Equivalence.IPS);
        int len = pick(new int[] {8, 16, 24, 32});
        m.setMasked(
            MatchField.IPV4_DST,
            IPv4AddressWithMask.of(IPv4Address.of(ip), IPv4Address.ofCidrMaskLength(len)));
      }
      if (chance(0.4)) {
        st.proto = chance(0.5) ? 6 : 17;
        m.setExact(MatchField.IP_PROTO, IpProtocol.of((short) st.proto));
        if (chance(0.5)) {
          TransportPort tp = TransportPort.of(pick(TP));
          m.setExact(st.proto == 6 ? MatchField.TCP_DST : MatchField.UDP_DST, tp);
        }
      }
    } else if (e < 0.55) {
      st.eth = 0x0806;
      m.setExact(MatchField.ETH_TYPE, EthType.ARP);
    } else if (e < 0.62) {
      st.eth = 0x8847;
      st.mpls = true;
      m.setExact(MatchField.ETH_TYPE, EthType.MPLS_UNICAST);
      if (chance(0.5)) {
        m.setExact(MatchField.MPLS_LABEL, U32.of(500));
      }
    } else if (e < 0.67) {
      st.eth = 0x88b5;
      m.setExact(MatchField.ETH_TYPE, EthType.of(0x88b5));
    }
    if (chance(0.2)) {
      m.setExact(MatchField.ETH_DST, MacAddress.of(pick(MACS)));
    }
    if (table > 0 && chance(0.3)) {
      m.setMasked(
          MatchField.METADATA, OFMetadata.of(U64.of(rnd.nextInt(4))), OFMetadata.of(U64.of(0x3)));
    }
    List<OFInstruction> ins = new ArrayList<>();
    List<OFAction> apply = actions(st, 0.35, false);
    if (!apply.isEmpty()) {
      ins.add(F.instructions().applyActions(apply));
    }
    if (chance(0.1)) {
      ins.add(F.instructions().clearActions());
    }
    if (chance(0.25)) {
      ins.add(F.instructions().writeActions(actions(st, 0.0, true)));
    }
    if (chance(0.2)) {
      ins.add(F.instructions().writeMetadata(U64.of(rnd.nextInt(4)), U64.of(0x3)));
    }
    if (table < TABLES - 1 && chance(0.4)) {
      int to = table + 1 + rnd.nextInt(TABLES - 1 - table);
      ins.add(F.instructions().gotoTable(TableId.of(to)));
    }
    return F.buildFlowAdd()
        .setTableId(TableId.of(table))
        .setPriority(priority(table))
        .setMatch(m.build())
        .setInstructions(ins)
        .build();
  }

  /** An action list (apply) or an action set (write), valid for what {@code st} knows. */
  private List<OFAction> actions(State st, double emptyP, boolean set) {
    List<OFAction> a = new ArrayList<>();
    if (chance(emptyP)) {
      return a;
    }
    int n = 1 + rnd.nextInt(set ? 2 : 4);
    boolean vlan = st.vlan;
    boolean pushed = false;
    for (int i = 0; i < n; i++) {
      double k = rnd.nextDouble();
      if (k < 0.35) {
        a.add(out(vport()));
      } else if (k < 0.42) {
        a.add(
            F.actions()
                .output(
                    pick(List.of(OFPort.FLOOD, OFPort.ALL, OFPort.CONTROLLER, OFPort.IN_PORT)),
                    0xffff));
      } else if (k < 0.5) {
        a.add(F.actions().group(OFGroup.of(pick(GROUPS))));
      } else if (k < 0.58) {
        a.add(F.actions().setField(F.oxms().ethDst(MacAddress.of(pick(MACS)))));
      } else if (k < 0.68 && !pushed) {
        a.add(F.actions().pushVlan(chance(0.8) ? EthType.VLAN_FRAME : EthType.Q_IN_Q));
        a.add(F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(pick(VIDS)))));
        vlan = true;
        pushed = set; // an action set holds one push
      } else if (k < 0.74 && vlan && !set) {
        a.add(F.actions().popVlan());
        vlan = false;
      } else if (k < 0.8 && vlan && !set) {
        a.add(F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(pick(VIDS)))));
      } else if (k < 0.86 && st.eth == 0x0800 && !st.mpls) {
        a.add(F.actions().setField(F.oxms().ipv4Src(IPv4Address.of(pick(Equivalence.IPS)))));
      } else if (k < 0.9 && st.proto > 0 && !st.mpls) {
        TransportPort tp = TransportPort.of(pick(TP));
        a.add(F.actions().setField(st.proto == 6 ? F.oxms().tcpSrc(tp) : F.oxms().udpSrc(tp)));
      } else if (k < 0.95 && !set && st.eth == 0x0800 && !st.mpls) {
        a.add(F.actions().pushMpls(EthType.MPLS_UNICAST));
        a.add(F.actions().setField(F.oxms().mplsLabel(U32.of(100 + rnd.nextInt(3)))));
        st.mpls = true;
      } else if (!set && st.mpls && st.eth == 0x8847) {
        a.add(F.actions().popMpls(EthType.IPv4));
        st.mpls = false;
        st.eth = 0x0800;
      } else {
        a.add(out(vport()));
      }
    }
    if (!set) {
      st.vlan = vlan;
    }
    return a;
  }

  /** Random frames over the rules' pools. */
  List<Frame> frames(int n) {
    List<Frame> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      long src = pick(MACS);
      long dst = pick(MACS);
      Frame f;
      double k = rnd.nextDouble();
      if (k < 0.6) {
        f =
            Frame.l4(
                src,
                dst,
                pick(Equivalence.IPS),
                pick(Equivalence.IPS),
                chance(0.5) ? 6 : 17,
                pick(TP),
                pick(TP));
      } else if (k < 0.72) {
        f = Frame.arp(src, 1 + rnd.nextInt(2), pick(Equivalence.IPS), pick(Equivalence.IPS));
      } else if (k < 0.82) {
        f = Frame.eth(src, dst, 0x88b5);
      } else {
        f =
            Frame.l4(src, dst, pick(Equivalence.IPS), pick(Equivalence.IPS), 17, 5, pick(TP))
                .labelled(chance(0.5) ? 500 : 501, 7);
      }
      double t = rnd.nextDouble();
      if (t < 0.35) {
        f = f.tagged(0x8100, rnd.nextInt(8), pick(VIDS));
      } else if (t < 0.5 && wireVlans > 1) {
        f = f.tagged(0x88a8, 0, pick(VIDS)).tagged(0x8100, 0, pick(VIDS));
      }
      out.add(f.payload("r" + i));
    }
    return out;
  }
}
