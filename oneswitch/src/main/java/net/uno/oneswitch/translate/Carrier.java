package net.uno.oneswitch.translate;

import java.util.List;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionSetField;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.U32;

/**
 * The flow-id carrier of a frame crossing the PCIe link (pure). VLAN by default (the tag is pushed
 * outermost, popped by the egress dispatch); an MPLS label where the VLAN carrier cannot carry the
 * frame faithfully: the frame is known to carry 2 VLAN headers (a carrier tag would be a third,
 * more than OVS handles), or it is known to be VLAN-tagged (OF1.3 cannot match a second, inner
 * header, so it may be QinQ already), or it is itself MPLS, or the 4094 VLAN ids are exhausted.
 *
 * <p>On OVS (checked on 3.1, OF1.3) {@code push_mpls} inserts the shim after every VLAN header,
 * right before the L3 header, and {@code pop_mpls:ET} puts ET back there, so a QinQ frame crosses
 * as {@code 88a8/8100/8847/payload} and leaves identical. {@code pop_mpls} needs the payload
 * ethertype, so MPLS labels are keyed by (egress vport, ethertype), and MPLS is used only where
 * that ethertype is known statically: the rule matches eth_type exactly and no action before the
 * output changes it. Where it is not but the frame's outer VLAN id is (the rule matches vlan_vid
 * exactly, or set it after its push), the <em>VLAN id rewrite</em>: that id becomes the flow-id on
 * the PCIe link and the egress writes it back (no header added). Otherwise the output is refused
 * (fail closed).
 */
public final class Carrier {
  /** Flag bit of an MPLS tag key; the ethertype sits in bits 40..55, the vport in bits 0..31. */
  static final long MPLS_BIT = 1L << 63;

  /** Flag bit of a VLAN id rewrite key; the frame's outer VLAN id sits in bits 40..51. */
  static final long REWRITE_BIT = 1L << 62;

  /** MPLS carrier labels (0..15 are reserved by RFC 3032). */
  public static final int MIN_LABEL = 16;

  public static final int MAX_LABEL = 1048575;

  /** MPLS tag rules are above the VLAN ones: a QinQ frame under a label has a VLAN id outermost. */
  public static final int PRIO_MPLS = Translator.PRIO_TAG + 1;

  private static final OFFactory F = MatchUtil.F;

  private Carrier() {}

  /**
   * Which carrier an output across PCIe takes (config {@code carrier}). AUTO: the VLAN tag, an MPLS
   * label where the VLAN tag cannot carry the frame faithfully (see the class doc). VLAN: never a
   * label (such outputs are refused, VLAN exhaustion gives TABLE_FULL). MPLS: a label wherever the
   * ethertype is known, else the VLAN tag where it fits.
   */
  public enum Mode {
    VLAN,
    MPLS,
    AUTO;

    /** The mode of a config value {@code vlan|mpls|auto}; empty if none. */
    public static java.util.Optional<Mode> parse(String s) {
      for (Mode m : values()) {
        if (m.name().toLowerCase(java.util.Locale.ROOT).equals(s)) {
          return java.util.Optional.of(m);
        }
      }
      return java.util.Optional.empty();
    }
  }

  /** The tag key of the MPLS label toward vport {@code vport} for payload ethertype {@code et}. */
  public static long mplsKey(int vport, int et) {
    return Integer.toUnsignedLong(vport) | ((long) (et & 0xffff) << 40) | MPLS_BIT;
  }

  public static boolean isMpls(long key) {
    return (key & MPLS_BIT) != 0;
  }

  /**
   * The tag key of the VLAN id rewrite toward vport {@code vport} of frames whose outer VLAN id is
   * {@code vid}: the flow-id replaces that id across PCIe and the egress writes {@code vid} back.
   */
  public static long rewriteKey(int vport, int vid) {
    return Integer.toUnsignedLong(vport) | ((long) (vid & 0xfff) << 40) | REWRITE_BIT;
  }

  public static boolean isRewrite(long key) {
    return (key & REWRITE_BIT) != 0;
  }

  /** The payload ethertype of an MPLS key. */
  public static int ethType(long key) {
    return (int) ((key >>> 40) & 0xffff);
  }

  /**
   * What is known statically about the frame at one point of an action list: the VLAN headers it
   * surely carries ({@code vlans}), its ethertype after them ({@code ethType}, -1 if unknown), and
   * how many more it may carry ({@code extra}) than its rule's match shows: one that came in tagged
   * at a rule matching no vlan_vid, one pushed by an earlier table ({@link VlanPushOrder#depth}).
   * OVS keeps at most 2 VLAN headers (a push onto two drops the innermost, checked on OVS 3.1: on
   * the reference alike), so {@link #max} is at most 2. The VLAN carrier is faithful only for a
   * frame of at most one header; the MPLS label (after every VLAN header) for any. {@code
   * outerVid}: the outer VLAN header's id when known (-1 if not): the VLAN id rewrite carries any
   * such frame.
   */
  public record Frame(int vlans, int ethType, int extra, int outerVid) {
    /** Nothing known (group buckets, packet-outs): VLAN carrier, as before. */
    public static final Frame UNKNOWN = new Frame(0, -1);

    public Frame {
      extra = Math.max(0, Math.min(extra, Translator.MAX_VLAN_HEADERS - vlans));
      outerVid = vlans > 0 ? outerVid : -1;
    }

    public Frame(int vlans, int ethType) {
      this(vlans, ethType, 0, -1);
    }

    /** The most VLAN headers the frame may carry. */
    public int max() {
      return vlans + extra;
    }

    /** The same frame with {@code more} possible headers (see the record doc). */
    public Frame withExtra(int more) {
      return new Frame(vlans, ethType, more, outerVid);
    }

    /** The frame a rule with match {@code m} sees before its actions. */
    public static Frame of(Match m) {
      int et = -1;
      if (m.isExact(MatchField.ETH_TYPE)) {
        et = m.get(MatchField.ETH_TYPE).getValue();
        if (et == 0x8100 || et == 0x88a8 || et == 0x9100) {
          et = -1; // a third VLAN header's TPID: not a payload pop_mpls can restore
        }
      }
      int vid = -1;
      if (m.isExact(MatchField.VLAN_VID) && MatchUtil.vlanPresent(m)) {
        vid = m.get(MatchField.VLAN_VID).getVlan();
      }
      return new Frame(MatchUtil.vlanPresent(m) ? 1 : 0, et, 0, vid);
    }

    /** The frame after action {@code a}. */
    public Frame after(OFAction a) {
      OFActionType t = a.getType();
      return switch (t) {
          // A pushed header's id is the outer one's or 0 until set: taken as unknown.
        case PUSH_VLAN -> new Frame(vlans + 1, ethType, extra, -1);
        case POP_VLAN ->
            vlans > 0
                ? new Frame(vlans - 1, ethType, extra, -1)
                : new Frame(0, ethType, Math.max(0, extra - 1), -1);
          // The controller's own MPLS/PBB: the payload type is no longer the matched one.
        case PUSH_MPLS, POP_MPLS, PUSH_PBB, POP_PBB -> new Frame(vlans, -1, extra, outerVid);
        case SET_FIELD ->
            ((OFActionSetField) a).getField().getMatchField().equals(MatchField.VLAN_VID)
                ? new Frame(
                    vlans,
                    ethType,
                    extra,
                    ((OFVlanVidMatch) ((OFActionSetField) a).getField().getValue()).getVlan())
                : this;
        default -> this;
      };
    }
  }

  /**
   * Appends the actions sending the frame {@code f} through PCIe port {@code pcie} with the tag
   * keyed on {@code base} (a remote vport's number, or a handoff's: {@link Offload#handoffKey}):
   * VLAN tag key {@code base}, label and rewrite keys {@code base} plus their bits; then restoring
   * the frame ({@code undo}: later actions of an apply-actions list see it unchanged). Refuses what
   * no carrier carries faithfully. {@code l4After}: a later action of the list sets a field that
   * needs the IP protocol (TCP/UDP/SCTP ports, ICMP, ND), which OVS no longer knows after {@code
   * pop_mpls} (it refuses such a rule with BAD_MATCH/MATCH_INCONSISTENT), so the label is not used
   * then.
   */
  static void sendKeyed(
      Mode mode,
      Frame f,
      long base,
      Translator.TagSource tags,
      int pcie,
      int maxLen,
      boolean undo,
      boolean l4After,
      List<OFAction> out)
      throws OfError {
    int vport = (int) base;
    boolean known = f.ethType() >= 0 && mode != Mode.VLAN;
    if (needsMoreThanVlan(mode, f)) {
      if (f.outerVid() >= 0 && mode != Mode.VLAN) {
        // First choice: no header added, and the frame keeps its L3/L4 context for later actions.
        try {
          rewrite(f.outerVid(), base, tags, pcie, maxLen, undo, out);
          return;
        } catch (OfError e) {
          if (e.code() != OFFlowModFailedCode.TABLE_FULL || !known) {
            throw e;
          }
        }
      }
      boolean mplsLosesL4 = undo && l4After; // pop_mpls gives back the ethertype, not nw_proto
      if (known && !mplsLosesL4) {
        // Tagged: maybe QinQ already. MPLS: our label on top of the controller's stack, so no frame
        // under a VLAN carrier tag could look like a label of ours to the egress dispatch.
        mpls(f.ethType(), base, tags, pcie, maxLen, undo, out);
        return;
      }
      if (f.max() >= Translator.MAX_VLAN_HEADERS) {
        throw new OfError(
            OFBadActionCode.UNSUPPORTED_ORDER,
            "output to vport "
                + Integer.toUnsignedString(vport)
                + " crosses the PCIe link with "
                + headers(f)
                + (known
                    ? ": the VLAN carrier would be a third header, the MPLS carrier would lose"
                        + " the IP protocol a later set_field of this list needs (OVS rejects"
                        + " it after pop_mpls), and the VLAN id rewrite needs a known outer VLAN"
                        + " id (match vlan_vid exactly, or set it after a push)"
                    : ": the VLAN carrier would be a third header, the MPLS carrier needs a"
                        + " known eth_type (match it exactly; no push/pop mpls before the output)"
                        + " and the VLAN id rewrite a known outer VLAN id (match vlan_vid"
                        + " exactly, or set it after a push)"));
      }
      // At most one VLAN header (the table's depth says no more can come in): the VLAN tag is
      // faithful, and keeps the L4 context the label would lose.
    }
    int tag;
    try {
      tag = tags.tag(base);
    } catch (OfError e) {
      if (e.code() != OFFlowModFailedCode.TABLE_FULL || !known) {
        throw e;
      }
      mpls(f.ethType(), base, tags, pcie, maxLen, undo, out); // VLAN ids exhausted
      return;
    }
    out.add(F.actions().pushVlan(EthType.VLAN_FRAME));
    out.add(F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tag))));
    out.add(F.actions().output(OFPort.of(pcie), maxLen));
    if (undo) {
      out.add(F.actions().popVlan());
    }
  }

  /**
   * True if the VLAN tag is not faithful for frame {@code f} (VLAN ids exhaustion aside): {@link
   * #sendKeyed} takes an MPLS label (known eth_type) or refuses, and the VLAN-only paths
   * (write_actions carrier groups) refuse such outputs across PCIe. The one place this decision is
   * made.
   */
  public static boolean needsMoreThanVlan(Mode mode, Frame f) {
    boolean known = f.ethType() >= 0 && mode != Mode.VLAN;
    return f.max() >= Translator.MAX_VLAN_HEADERS
        || (known && (mode == Mode.MPLS || f.vlans() >= 1 || isMplsType(f.ethType())));
  }

  /** How a refusal describes the VLAN headers of {@code f} (2 known, or possibly 2). */
  public static String headers(Frame f) {
    return f.vlans() >= Translator.MAX_VLAN_HEADERS
        ? "2 VLAN headers"
        : "a frame that may carry 2 VLAN headers (it came in tagged and a push of this rule or an"
            + " earlier table added one, or it came in QinQ with wire_vlans 2; the rule's match"
            + " cannot tell)";
  }

  private static void mpls(
      int et,
      long base,
      Translator.TagSource tags,
      int pcie,
      int maxLen,
      boolean undo,
      List<OFAction> out)
      throws OfError {
    int label = tags.tag(base | ((long) (et & 0xffff) << 40) | MPLS_BIT);
    out.add(F.actions().pushMpls(EthType.MPLS_UNICAST));
    out.add(F.actions().setField(F.oxms().mplsLabel(U32.of(label))));
    out.add(F.actions().output(OFPort.of(pcie), maxLen));
    if (undo) {
      out.add(F.actions().popMpls(EthType.of(et)));
    }
  }

  /**
   * The VLAN id rewrite: the frame's outer VLAN id, known to be {@code vid}, becomes the flow-id
   * across PCIe (no header added, whatever the ethertype and depth), and the egress dispatch writes
   * {@code vid} back ({@link #deliver}); with {@code undo}, {@code vid} is written back here for
   * the later actions of the list.
   */
  private static void rewrite(
      int vid,
      long base,
      Translator.TagSource tags,
      int pcie,
      int maxLen,
      boolean undo,
      List<OFAction> out)
      throws OfError {
    int tag = tags.tag(base | ((long) (vid & 0xfff) << 40) | REWRITE_BIT);
    out.add(F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tag))));
    out.add(F.actions().output(OFPort.of(pcie), maxLen));
    if (undo) {
      out.add(F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(vid))));
    }
  }

  /** Set-field targets whose prerequisite is the IP protocol (ip_proto), which pop_mpls loses. */
  public static boolean needsIpProto(MatchField<?> f) {
    return f == MatchField.TCP_SRC
        || f == MatchField.TCP_DST
        || f == MatchField.UDP_SRC
        || f == MatchField.UDP_DST
        || f == MatchField.SCTP_SRC
        || f == MatchField.SCTP_DST
        || f == MatchField.ICMPV4_TYPE
        || f == MatchField.ICMPV4_CODE
        || f == MatchField.ICMPV6_TYPE
        || f == MatchField.ICMPV6_CODE
        || f == MatchField.IPV6_ND_TARGET
        || f == MatchField.IPV6_ND_SLL
        || f == MatchField.IPV6_ND_TLL;
  }

  static boolean isMplsType(int et) {
    return et == 0x8847 || et == 0x8848;
  }

  /** Match of the dispatch rule for tag {@code tag} of {@code key} arriving on {@code inPort}. */
  public static Match tagMatch(long key, int inPort, int tag) {
    if (isMpls(key)) {
      return F.buildMatch()
          .setExact(MatchField.IN_PORT, OFPort.of(inPort))
          .setExact(MatchField.ETH_TYPE, EthType.MPLS_UNICAST)
          .setExact(MatchField.MPLS_LABEL, U32.of(tag))
          .build();
    }
    return F.buildMatch()
        .setExact(MatchField.IN_PORT, OFPort.of(inPort))
        .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(tag))
        .build();
  }

  /** Priority of the dispatch rules of {@code key}. */
  public static int priority(long key) {
    return isMpls(key) ? PRIO_MPLS : Translator.PRIO_TAG;
  }

  /** The action that removes the carrier of {@code key} at its egress. */
  static OFAction undo(long key) {
    return deliver(key, 0).get(0);
  }

  /** Delivery at the egress switch: remove the carrier, output to {@code port}. */
  public static List<OFAction> deliver(long key, int port) {
    OFAction undo =
        isMpls(key)
            ? F.actions().popMpls(EthType.of(ethType(key)))
            : isRewrite(key)
                ? F.actions()
                    .setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan((int) ((key >>> 40) & 0xfff))))
                : F.actions().popVlan();
    return List.of(undo, F.actions().output(OFPort.of(port), 0xffff));
  }
}
