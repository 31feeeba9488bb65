package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.TOPO;
import static net.uno.oneswitch.translate.Fixtures.apply;
import static net.uno.oneswitch.translate.Fixtures.assertOfError;
import static net.uno.oneswitch.translate.Fixtures.out;
import static net.uno.oneswitch.translate.Fixtures.rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.U32;

/** The MPLS flow-id carrier: when it is chosen, its exact actions, dispatch, allocator, remap. */
class CarrierTest {
  private static final int IPV4 = 0x0800;
  private static final OFAction PUSH = F.actions().pushVlan(EthType.VLAN_FRAME);

  private final CarrierTags tags = new CarrierTags();

  private static Translator translator(CarrierTags ct, PortMap pm) {
    return new Translator(TOPO, pm, 252, ct::acquire, g -> g == 7);
  }

  /** in_port=V2 (host:100), vlan_vid=10, optionally eth_type. */
  private static Match vlan10(Integer ethType) {
    var b =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10));
    if (ethType != null) {
      b.setExact(MatchField.ETH_TYPE, EthType.of(ethType));
    }
    return b.build();
  }

  private static OFAction setVid(int vid) {
    return F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(vid)));
  }

  private static Match inPort(int v, Integer ethType) {
    var b = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(v));
    if (ethType != null) {
      b.setExact(MatchField.ETH_TYPE, EthType.of(ethType));
    }
    return b.build();
  }

  private static List<OFAction> actions(PhysRule p) {
    return ((OFInstructionApplyActions) p.instructions().get(0)).getActions();
  }

  private static List<OFAction> mplsSend(int label, int pcie, int et) {
    return List.of(
        F.actions().pushMpls(EthType.MPLS_UNICAST),
        F.actions().setField(F.oxms().mplsLabel(U32.of(label))),
        out(pcie),
        F.actions().popMpls(EthType.of(et)));
  }

  @Test
  void qinqAcrossPcieTakesAnMplsLabelAndIsRestored() throws OfError {
    Translator t = translator(tags, PORTS);
    // V2 (host) -> V1 (snic0, PCIe host:1): VLAN 10 + own push = 2 headers + IPv4 known.
    List<PhysRule> p = t.rule(rule(0, 10, vlan10(IPV4), apply(PUSH, out(1), out(4))));
    assertEquals(1, p.size());
    List<OFAction> want = new java.util.ArrayList<>(List.of(PUSH));
    want.addAll(mplsSend(Carrier.MIN_LABEL, 1, IPV4));
    want.add(out(101)); // later actions see the QinQ frame unchanged
    assertEquals(want, actions(p.get(0)));
    assertEquals(Map.of(Carrier.mplsKey(1, IPV4), Carrier.MIN_LABEL), tags.live());
    assertEquals(1, Translator.tagVport(Carrier.mplsKey(1, IPV4)));
    assertEquals(0, Translator.tagSlot(Carrier.mplsKey(1, IPV4)));
  }

  @Test
  void oneLabelPerVportAndEthertypeRefcounted() throws OfError {
    Translator t = translator(tags, PORTS);
    t.rule(rule(0, 10, vlan10(IPV4), apply(PUSH, out(1))));
    t.rule(rule(0, 11, vlan10(IPV4), apply(PUSH, out(1))));
    t.rule(rule(0, 12, vlan10(0x86dd), apply(PUSH, out(1))));
    t.rule(rule(0, 13, vlan10(IPV4), apply(PUSH, out(3))));
    assertEquals(2, tags.refs(Carrier.mplsKey(1, IPV4)));
    assertEquals(16, tags.tagOf(Carrier.mplsKey(1, IPV4)).getAsInt());
    assertEquals(17, tags.tagOf(Carrier.mplsKey(1, 0x86dd)).getAsInt());
    assertEquals(18, tags.tagOf(Carrier.mplsKey(3, IPV4)).getAsInt());
    // One known VLAN header (maybe QinQ: OF1.3 cannot match the inner one) whose id is known: the
    // VLAN id rewrite comes first (no header added, the L3/L4 context kept for later actions).
    t.rule(rule(0, 14, vlan10(IPV4), apply(out(1))));
    assertEquals(1, tags.refs(Carrier.rewriteKey(1, 10)));
    // Its id no longer known (a push, then a pop): MPLS as well.
    t.rule(rule(0, 15, vlan10(IPV4), apply(PUSH, F.actions().popVlan(), out(1))));
    assertEquals(3, tags.refs(Carrier.mplsKey(1, IPV4)));
    // An MPLS frame: our label goes on top of its stack, pop_mpls:0x8847 restores it.
    List<PhysRule> p = t.rule(rule(0, 19, inPort(2, 0x8847), apply(out(1))));
    assertEquals(mplsSend(19, 1, 0x8847), actions(p.get(0)));
    // One VLAN header and an unknown ethertype, or none known: the VLAN carrier, as before.
    t.rule(rule(0, 16, vlan10(null), apply(out(1))));
    t.rule(rule(0, 17, inPort(2, IPV4), apply(out(1))));
    t.rule(rule(0, 18, vlan10(IPV4), apply(F.actions().popVlan(), out(1))));
    assertEquals(3, tags.refs(Translator.tagKey(1, 0)));
    assertEquals(2, tags.tagOf(Translator.tagKey(1, 0)).getAsInt()); // 1: rule 14's rewrite
  }

  @Test
  void unknownEthertypeWithTwoVlansIsStillRefused() {
    Translator t = translator(tags, PORTS);
    OFAction pushMpls = F.actions().pushMpls(EthType.MPLS_UNICAST);
    OFAction popMpls = F.actions().popMpls(EthType.IPv4);
    for (var r :
        List.of(
            rule(0, 10, vlan10(null), apply(PUSH, out(1))),
            // the controller's own MPLS push/pop changes the payload type
            rule(0, 10, vlan10(IPV4), apply(PUSH, pushMpls, out(1))),
            rule(0, 10, vlan10(0x8847), apply(PUSH, popMpls, out(1))),
            // a matched TPID is not a payload type pop_mpls can restore
            rule(0, 10, vlan10(0x8100), apply(PUSH, out(1))),
            rule(0, 10, vlan10(null), apply(PUSH, F.actions().output(OFPort.FLOOD, 0))))) {
      assertOfError("BadAction/UNSUPPORTED_ORDER", () -> t.rule(r));
    }
    assertTrue(tags.live().isEmpty());
  }

  @Test
  void floodWithTwoVlansSendsEachRemotePortUnderItsLabel() throws OfError {
    Translator t = translator(tags, PORTS);
    List<PhysRule> p =
        t.rule(rule(0, 10, vlan10(IPV4), apply(PUSH, F.actions().output(OFPort.FLOOD, 0))));
    List<OFAction> a = actions(p.get(0));
    assertEquals(
        List.of(Carrier.mplsKey(1, IPV4), Carrier.mplsKey(3, IPV4)),
        List.copyOf(tags.live().keySet()));
    assertTrue(a.containsAll(mplsSend(16, 1, IPV4).subList(0, 2)));
    assertTrue(a.contains(F.actions().setField(F.oxms().mplsLabel(U32.of(17)))));
    assertFalse(a.stream().anyMatch(x -> x.equals(F.actions().popVlan())));
  }

  @Test
  void vlanIdsExhaustedFallBackToMplsWhereTheEthertypeIsKnown() throws OfError {
    CarrierTags small = new CarrierTags(new TagAllocator(1, 1), new TagAllocator(16, 17));
    Translator t = translator(small, PORTS);
    t.rule(rule(0, 10, inPort(2, null), apply(out(1)))); // takes the only VLAN id
    List<PhysRule> p = t.rule(rule(0, 10, inPort(2, IPV4), apply(out(3))));
    assertEquals(mplsSend(16, 2, IPV4), actions(p.get(0)));
    assertOfError(
        "FlowModFailed/TABLE_FULL", () -> t.rule(rule(0, 10, inPort(4, null), apply(out(3)))));
    t.rule(rule(0, 10, inPort(2, 0x86dd), apply(out(3)))); // label 17
    assertOfError(
        "FlowModFailed/TABLE_FULL", () -> t.rule(rule(0, 10, inPort(2, 0x0806), apply(out(3)))));
    small.release(Carrier.mplsKey(3, IPV4));
    assertEquals(16, small.acquire(Carrier.mplsKey(3, 0x0806)));
  }

  private static PhysRule tagRule(List<PhysRule> d, String sw, int inPort) {
    return d.stream()
        .filter(
            r ->
                r.sw().equals(sw)
                    && r.priority() == Carrier.PRIO_MPLS
                    && r.match().get(MatchField.IN_PORT).getPortNumber() == inPort)
        .findFirst()
        .orElseThrow();
  }

  @Test
  void dispatchRoutesLabelsFromEveryPcieSideAndFollowsARemap() {
    long key = Carrier.mplsKey(1, IPV4);
    Map<Long, Integer> live = Map.of(key, 16, Translator.tagKey(1, 0), 16);
    List<PhysRule> d = translator(tags, PORTS).dispatch(live);
    PhysRule atSnic0 = tagRule(d, "snic0", 100);
    assertEquals(EthType.MPLS_UNICAST, atSnic0.match().get(MatchField.ETH_TYPE));
    assertEquals(U32.of(16), atSnic0.match().get(MatchField.MPLS_LABEL));
    assertFalse(atSnic0.match().isExact(MatchField.VLAN_VID));
    assertEquals(List.of(F.actions().popMpls(EthType.IPv4), out(1)), actions(atSnic0));
    assertEquals(
        List.of(F.actions().output(OFPort.IN_PORT, 0xffff)), actions(tagRule(d, "host", 1)));
    assertEquals(List.of(out(1)), actions(tagRule(d, "host", 2))); // from snic1 on to snic0
    assertEquals(
        List.of(F.actions().output(OFPort.IN_PORT, 0xffff)), actions(tagRule(d, "snic1", 100)));
    // The VLAN tag with the same number keeps its own rule, below the label's.
    assertEquals(4, d.stream().filter(r -> r.priority() == Translator.PRIO_TAG).count());
    assertEquals(4, d.stream().filter(r -> r.priority() == Carrier.PRIO_MPLS).count());

    // Remap V1 snic0:1 -> host:102: the label is delivered at the host from both PCIe sides.
    PortMap moved = PORTS.with(new VPort(1, "host", 102, "eth0"));
    List<PhysRule> d2 = translator(tags, moved).dispatch(live);
    List<OFAction> deliver = List.of(F.actions().popMpls(EthType.IPv4), out(102));
    assertEquals(deliver, actions(tagRule(d2, "host", 1)));
    assertEquals(deliver, actions(tagRule(d2, "host", 2)));
    assertEquals(
        List.of(F.actions().output(OFPort.IN_PORT, 0xffff)), actions(tagRule(d2, "snic0", 100)));
  }

  @Test
  void scaledOutVportWithTwoVlansIsRefused() {
    PortMap pm =
        PORTS.with(
            VPort.of(1, "eth0", List.of(new VPort.Loc("snic0", 1), new VPort.Loc("host", 102))));
    Translator t =
        new Translator(
            TOPO, pm, 252, tags::acquire, g -> false, Map.of(1, Translator.SCALE_GROUP_BASE));
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER",
        () -> t.rule(rule(0, 10, vlan10(IPV4), apply(PUSH, out(1)))));
  }

  @Test
  void groupWithARemoteBucketRefusesTwoVlans() throws OfError {
    OFBucket toV1 =
        F.buildBucket()
            .setWeight(0)
            .setWatchPort(OFPort.ANY)
            .setWatchGroup(OFGroup.ANY)
            .setActions(List.of(out(1)))
            .build();
    VirtualGroup g = new VirtualGroup(7, OFGroupType.ALL, List.of(toV1));
    Translator t =
        new Translator(TOPO, PORTS, 252, tags::acquire, id -> id == 7, Map.of(), id -> g);
    OFAction group = F.actions().group(OFGroup.of(7));
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(0, 10, vlan10(IPV4), apply(PUSH, group))));
    t.rule(rule(0, 10, vlan10(IPV4), apply(group))); // one header: the bucket's VLAN tag is fine
    // The bucket stays on snic0 for a rule there (in_port=V1): 2 headers are fine.
    Match atSnic0 =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(1))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10))
            .build();
    t.rule(rule(0, 10, atSnic0, apply(PUSH, group)));
  }

  @Test
  void modeVlanNeverLabelsModeMplsLabelsWhereverTheEthertypeIsKnown() throws OfError {
    Translator vlan = translator(tags, PORTS).carrier(Carrier.Mode.VLAN);
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER",
        () -> vlan.rule(rule(0, 10, vlan10(IPV4), apply(PUSH, out(1)))));
    assertEquals(
        Fixtures.tagged(1, 1), actions(vlan.rule(rule(0, 10, vlan10(IPV4), apply(out(1)))).get(0)));
    Translator mpls = translator(tags, PORTS).carrier(Carrier.Mode.MPLS);
    assertEquals(
        mplsSend(16, 1, IPV4),
        actions(mpls.rule(rule(0, 10, inPort(2, IPV4), apply(out(1)))).get(0)));
    // Unknown ethertype: the VLAN tag where it fits.
    assertEquals(
        Fixtures.tagged(1, 1),
        actions(mpls.rule(rule(0, 10, inPort(2, null), apply(out(1)))).get(0)));
    CarrierTags small = new CarrierTags(new TagAllocator(1, 1), new TagAllocator(16, 17));
    Translator v2 = translator(small, PORTS).carrier(Carrier.Mode.VLAN);
    v2.rule(rule(0, 10, inPort(2, null), apply(out(1))));
    assertOfError(
        "FlowModFailed/TABLE_FULL", () -> v2.rule(rule(0, 10, inPort(2, IPV4), apply(out(3)))));
    assertEquals(Carrier.Mode.MPLS, Carrier.Mode.parse("mpls").orElseThrow());
    assertTrue(Carrier.Mode.parse("MPLS").isEmpty());
  }

  @Test
  void frameTracksVlansAndEthertype() {
    Carrier.Frame f = Carrier.Frame.of(vlan10(IPV4));
    assertEquals(new Carrier.Frame(1, IPV4, 0, 10), f); // the outer VLAN id is known from the match
    assertEquals(new Carrier.Frame(2, IPV4), f.after(PUSH)); // a pushed id: unknown until set
    assertEquals(new Carrier.Frame(2, IPV4, 0, 20), f.after(PUSH).after(setVid(20)));
    assertEquals(
        new Carrier.Frame(0, IPV4), f.after(F.actions().popVlan()).after(F.actions().popVlan()));
    assertEquals(
        new Carrier.Frame(1, -1, 0, 10), f.after(F.actions().pushMpls(EthType.MPLS_UNICAST)));
    assertEquals(f, f.after(F.actions().decNwTtl()));
    assertEquals(new Carrier.Frame(0, -1), Carrier.Frame.of(inPort(1, null)));
  }

  @Test
  void keysOfBothCarriersAreDisjoint() throws OfError {
    long v = Translator.tagKey(0xffffff00, 0);
    long m = Carrier.mplsKey(0xffffff00, 0xffff);
    assertFalse(Carrier.isMpls(v));
    assertTrue(Carrier.isMpls(m));
    assertEquals(0xffff, Carrier.ethType(m));
    assertEquals(0xffffff00, Translator.tagVport(m));
    assertEquals(1, tags.acquire(v));
    assertEquals(16, tags.acquire(m));
    assertEquals(Map.of(v, 1, m, 16), tags.live());
    tags.release(v);
    tags.release(m);
    assertTrue(tags.live().isEmpty());
    assertThrows(IllegalStateException.class, () -> tags.release(m));
  }

  // ------------------------------------------------- write_actions carrier groups (VLAN only)

  private static List<org.projectfloodlight.openflow.protocol.instruction.OFInstruction> write(
      OFAction... a) {
    return List.of(F.instructions().writeActions(List.of(a)));
  }

  private static void assertRefused(Translator t, Match m, OFAction... set) {
    assertOfError("BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(0, 10, m, write(set))));
  }

  @Test
  void writeActionsOutputAcrossPcieIsRefusedWhereTheApplyPathTakesALabel() throws OfError {
    Translator t = translator(tags, PORTS);
    // A write_actions output to remote V1 (its carrier group bucket carries only the VLAN tag) of
    // a frame the apply path would label is refused, never sent under a third VLAN header.
    assertRefused(t, vlan10(IPV4), PUSH, out(1)); // 2 headers (the set's push)
    assertRefused(t, vlan10(IPV4), out(1)); // tagged, type known: the apply path labels it
    assertRefused(t, inPort(2, IPV4), PUSH, out(1)); // the set's push: tagged, type known
    assertRefused(t, inPort(2, 0x8847), out(1)); // an MPLS frame: labelled on the apply path
    assertRefused(t, vlan10(null), PUSH, out(1)); // 2 headers, type unknown: no carrier fits
    assertRefused(t, vlan10(IPV4), PUSH, F.actions().output(OFPort.FLOOD, 0)); // FLOOD reaches V1
    // The apply-actions before the set count: push in apply + match VLAN = 2 headers.
    var pushThenSet =
        List.of(
            F.instructions().applyActions(List.of(PUSH)),
            F.instructions().writeActions(List.of(out(1))));
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER", () -> t.rule(rule(0, 10, vlan10(null), pushThenSet)));
    assertTrue(tags.live().isEmpty(), "a refused set takes no tag");
    // The apply path carries the same frame under a label.
    assertTrue(
        actions(t.rule(rule(0, 10, vlan10(IPV4), apply(PUSH, out(1)))).get(0)).stream()
            .anyMatch(
                a ->
                    a.getType() == org.projectfloodlight.openflow.protocol.OFActionType.PUSH_MPLS));
  }

  @Test
  void writeActionsOutputWhereTheVlanCarrierIsFaithfulIsAccepted() throws OfError {
    Translator t = translator(tags, PORTS);
    int c1 = WriteActionSet.CARRIER_GROUP_BASE + 1;
    int c4 = WriteActionSet.CARRIER_GROUP_BASE + 4;
    // Local V4: no carrier tag at all, any depth.
    PhysRule local = t.rule(rule(0, 10, vlan10(IPV4), write(PUSH, out(4)))).get(0);
    assertTrue(WriteActionSet.carriersOf(local).contains(c4));
    // Untagged (or type unknown, one header): the VLAN carrier, as on the apply path.
    assertTrue(
        WriteActionSet.carriersOf(t.rule(rule(0, 10, inPort(2, IPV4), write(out(1)))).get(0))
            .contains(c1));
    assertTrue(
        WriteActionSet.carriersOf(t.rule(rule(0, 10, vlan10(null), write(out(1)))).get(0))
            .contains(c1));
    // The set's pop_vlan runs before its carrier group: 1 header left, type unknown -> VLAN.
    Match two = vlan10(null);
    t.rule(
        rule(
            0,
            10,
            two,
            List.of(
                F.instructions().applyActions(List.of(PUSH)),
                F.instructions().writeActions(List.of(F.actions().popVlan(), out(1))))));
    // carrier: vlan never labels: a tagged frame with a known type keeps the VLAN carrier.
    Translator vlan = translator(tags, PORTS).carrier(Carrier.Mode.VLAN);
    assertTrue(
        WriteActionSet.carriersOf(vlan.rule(rule(0, 10, vlan10(IPV4), write(out(1)))).get(0))
            .contains(c1));
    assertRefused(vlan, vlan10(IPV4), PUSH, out(1)); // but 2 headers still are refused
    // carrier: mpls labels every known type: its set output across PCIe is refused.
    assertRefused(translator(tags, PORTS).carrier(Carrier.Mode.MPLS), inPort(2, IPV4), out(1));
  }

  @Test
  void groupInWriteActionsSeesTheSetsPushes() throws OfError {
    OFBucket toV1 =
        F.buildBucket()
            .setWeight(0)
            .setWatchPort(OFPort.ANY)
            .setWatchGroup(OFGroup.ANY)
            .setActions(List.of(out(1)))
            .build();
    VirtualGroup g = new VirtualGroup(7, OFGroupType.ALL, List.of(toV1));
    Translator t =
        new Translator(TOPO, PORTS, 252, tags::acquire, id -> id == 7, Map.of(), id -> g);
    OFAction group = F.actions().group(OFGroup.of(7));
    assertRefused(t, vlan10(IPV4), PUSH, group); // match VLAN + the set's push = 2 headers
    t.rule(rule(0, 10, vlan10(IPV4), write(group))); // one header: the bucket's tag is fine
  }

  @Test
  void aKnownOuterVlanIdOfUnknownEthertypeCrossesByItsRewrite() throws OfError {
    Translator t = translator(tags, PORTS);
    // VLAN 10 matched (no ethertype), a push set to 20: 2 headers, outer id 20 known.
    List<PhysRule> p = t.rule(rule(0, 10, vlan10(null), apply(PUSH, setVid(20), out(1), out(4))));
    long key = Carrier.rewriteKey(1, 20);
    int tag = tags.tagOf(key).getAsInt();
    assertEquals(
        List.of(PUSH, setVid(20), setVid(tag), out(1), setVid(20), out(101)), actions(p.get(0)));
    // The egress (snic0, from PCIe port 100) writes the id back and delivers.
    PhysRule d =
        t.dispatch(tags.live()).stream()
            .filter(r -> r.sw().equals("snic0") && r.priority() == Translator.PRIO_TAG)
            .findFirst()
            .orElseThrow();
    assertEquals(Carrier.tagMatch(key, 100, tag), d.match());
    assertEquals(List.of(setVid(20), out(1)), actions(d));
    // No set after the push: the outer id is not known, nothing carries it.
    assertOfError(
        "BadAction/UNSUPPORTED_ORDER",
        () -> t.rule(rule(0, 11, vlan10(null), apply(PUSH, out(1)))));
  }

  private static OFAction setTcpDst(int port) {
    return F.actions()
        .setField(F.oxms().tcpDst(org.projectfloodlight.openflow.types.TransportPort.of(port)));
  }

  /** The rule: a VM's tagged TCP frame out to the wire, then its port rewritten locally. */
  @Test
  void aKnownOuterVlanIdTakesTheRewriteSoLaterL4SetFieldsStayValid() throws OfError {
    Translator t = translator(tags, PORTS);
    Match m =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10))
            .setExact(MatchField.ETH_TYPE, EthType.IPv4)
            .setExact(MatchField.IP_PROTO, org.projectfloodlight.openflow.types.IpProtocol.TCP)
            .build();
    List<PhysRule> p = t.rule(rule(0, 10, m, apply(out(1), setTcpDst(80), out(4))));
    int tag = tags.tagOf(Carrier.rewriteKey(1, 10)).getAsInt();
    assertEquals(
        List.of(setVid(tag), out(1), setVid(10), setTcpDst(80), out(101)), actions(p.get(0)));
    assertTrue(tags.live().keySet().stream().noneMatch(Carrier::isMpls));
  }

  /**
   * Outer id unknown (pushed, then popped): the label would lose the IP protocol the later
   * set_field needs (OVS: MATCH_INCONSISTENT), so the VLAN tag carries the one-header frame.
   */
  @Test
  void aLaterL4SetFieldKeepsTheLabelAwayWhereOneHeaderAtMost() throws OfError {
    Translator t = translator(tags, PORTS);
    Match m =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(2))
            .setExact(MatchField.VLAN_VID, OFVlanVidMatch.ofVlan(10))
            .setExact(MatchField.ETH_TYPE, EthType.IPv4)
            .setExact(MatchField.IP_PROTO, org.projectfloodlight.openflow.types.IpProtocol.UDP)
            .build();
    OFAction setUdp =
        F.actions()
            .setField(F.oxms().udpDst(org.projectfloodlight.openflow.types.TransportPort.of(53)));
    List<PhysRule> p =
        t.rule(rule(0, 10, m, apply(PUSH, F.actions().popVlan(), out(1), setUdp, out(4))));
    List<OFAction> a = actions(p.get(0));
    assertTrue(a.stream().noneMatch(x -> x.getType().name().equals("PUSH_MPLS")), "" + a);
    assertTrue(tags.live().keySet().stream().noneMatch(Carrier::isMpls));
    // Without the later set_field: the label, as before.
    t.rule(rule(0, 11, m, apply(PUSH, F.actions().popVlan(), out(1), out(4))));
    assertTrue(tags.live().keySet().stream().anyMatch(Carrier::isMpls));
  }
}
