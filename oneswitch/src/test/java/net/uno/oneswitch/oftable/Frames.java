package net.uno.oneswitch.oftable;

import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionPopMpls;
import org.projectfloodlight.openflow.protocol.action.OFActionPopVlan;
import org.projectfloodlight.openflow.protocol.action.OFActionPushMpls;
import org.projectfloodlight.openflow.protocol.action.OFActionPushVlan;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;

/** The header actions of {@link FakeOfTable} on a {@link Frame}, its length and its hash. */
final class Frames {
  /** The most VLAN headers OVS keeps (its flow key has room for two). */
  static final int MAX_VLANS = 2;

  private Frames() {}

  /** Applies a header-changing action (not output or group) to {@code fr}. */
  static void apply(OFAction a, Frame fr) {
    if (a instanceof OFActionPushVlan p) {
      fr.vlans.add(0, new Frame.Vlan(p.getEthertype().getValue(), 0, 0));
      while (fr.vlans.size() > MAX_VLANS) {
        fr.vlans.remove(fr.vlans.size() - 1);
      }
    } else if (a instanceof OFActionPopVlan) {
      if (!fr.vlans.isEmpty()) {
        fr.vlans.remove(0);
      }
    } else if (a instanceof OFActionPushMpls p) {
      Frame.Mpls top;
      if (!fr.mpls.isEmpty()) {
        Frame.Mpls o = fr.mpls.get(0);
        top = new Frame.Mpls(o.label(), o.tc(), false, o.ttl());
      } else if (fr.ip()) {
        top =
            new Frame.Mpls(
                0, (int) (fr.f.get("ip_dscp") & 7), true, (int) (long) fr.f.get("ip_ttl"));
      } else {
        top = new Frame.Mpls(0, 0, true, 64);
      }
      fr.mpls.add(0, top);
      fr.mplsType = p.getEthertype().getValue();
    } else if (a instanceof OFActionPopMpls p) {
      if (!fr.mpls.isEmpty()) {
        fr.mpls.remove(0);
        if (fr.mpls.isEmpty()) {
          fr.l3Type = p.getEthertype().getValue();
        }
      }
    } else if (a instanceof OFActionSetField s) {
      Fields.write(fr, s.getField().getMatchField().id, Fields.bits(s.getField().getValue()));
    } else if (a instanceof net.uno.oneswitch.translate.SymmetricHash) {
      // Writes a register the frame model does not hold: this fake's SELECT groups already pick
      // by a hash of the headers.
    } else {
      throw new UnsupportedOperationException("action " + a.getType());
    }
  }

  /** The frame's length on the wire (minimum frame size not applied). */
  static int length(Frame fr) {
    int l3 =
        switch (fr.l3Type) {
          case 0x0800 -> 20 + (fr.f.containsKey("tp_src") || fr.f.containsKey("icmp_type") ? 8 : 0);
          case 0x86dd -> 40 + (fr.f.containsKey("tp_src") ? 8 : 0);
          case 0x0806 -> 28;
          default -> 0;
        };
    return 14 + 4 * fr.vlans.size() + 4 * fr.mpls.size() + l3 + fr.payload.length();
  }

  /** A hash of the frame's headers (a SELECT group's choice): the same frame, the same bucket. */
  static int hash(Frame fr) {
    return fr.toString().hashCode() * 0x9e3779b1 >>> 8;
  }
}
