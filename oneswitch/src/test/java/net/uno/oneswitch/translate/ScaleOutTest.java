package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static net.uno.oneswitch.translate.Fixtures.PORTS;
import static net.uno.oneswitch.translate.Fixtures.TOPO;
import static net.uno.oneswitch.translate.Fixtures.apply;
import static net.uno.oneswitch.translate.Fixtures.assertOfError;
import static net.uno.oneswitch.translate.Fixtures.out;
import static net.uno.oneswitch.translate.Fixtures.rule;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import net.uno.oneswitch.model.Drain;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VPort.Loc;
import net.uno.oneswitch.model.VirtualGroup;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketInReason;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFBufferId;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * One virtual port served by several instances (issue 7 scale-out): V200 over 2-4 physical ports on
 * the host and the sNICs of {@link Fixtures#TOPO} (host PCIe 1 -> snic0, 2 -> snic1; sNIC PCIe
 * 100).
 */
class ScaleOutTest {
  private static final int V = 200;
  private static final int G = Translator.SCALE_GROUP_BASE + 5;
  private final TagAllocator tags = TagAllocator.vlan();

  private static PortMap with(Loc... inst) {
    return PORTS.with(VPort.of(V, "nf", List.of(inst)));
  }

  private Translator t(PortMap pm) {
    return new Translator(TOPO, pm, 252, tags::acquire, g -> g == 7, Map.of(V, G));
  }

  private static Match inPort(int v) {
    return F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(v)).build();
  }

  private static List<OFAction> actions(PhysRule p) {
    return ((OFInstructionApplyActions) p.instructions().get(0)).getActions();
  }

  private static List<OFAction> bucket(OFBucket b) {
    return b.getActions();
  }

  private static List<OFAction> tagTo(int tag, int port) {
    return List.of(
        F.actions().pushVlan(EthType.VLAN_FRAME),
        F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tag))),
        out(port));
  }

  private int tag(int slot) {
    return tags.tagOf(Translator.tagKey(V, slot)).getAsInt();
  }

  @Test
  void mappedPortsHashTheFlowSymmetricallyOnlyWhileAVportIsScaledOut() {
    Loc a = new Loc("host", 200);
    Loc b = new Loc("snic0", 201);
    List<PhysRule> one = t(with(a)).dispatch(Map.of());
    List<PhysRule> two = t(with(a, b)).dispatch(Map.of());
    java.util.function.Function<List<PhysRule>, List<PhysRule>> toPipeline =
        rs ->
            rs.stream()
                .filter(r -> r.priority() == Translator.PRIO_PORT)
                .filter(r -> !OFPort.CONTROLLER.equals(r.match().get(MatchField.IN_PORT)))
                .toList();
    assertTrue(toPipeline.apply(one).size() > 2);
    for (PhysRule r : toPipeline.apply(one)) {
      assertEquals(List.of(F.instructions().gotoTable(TableId.of(1))), r.instructions(), "" + r);
    }
    // every mapped port's entry (not only the scaled vport's: the hash is taken where a packet
    // enters, before the pipeline decides where it goes)
    assertEquals(toPipeline.apply(one).size() + 1, toPipeline.apply(two).size());
    for (PhysRule r : toPipeline.apply(two)) {
      assertEquals(
          List.of(
              F.instructions().applyActions(List.of(SymmetricHash.ACTION)),
              F.instructions().gotoTable(TableId.of(1))),
          r.instructions(),
          "" + r);
    }
  }

  @Test
  void tagKeysAndReservedGroupRange() {
    assertEquals(7L, Translator.tagKey(7, 0), "slot 0 is the vport: a remap keeps its tag");
    long k = Translator.tagKey(0xffffff00, 3);
    assertEquals(0xffffff00, Translator.tagVport(k));
    assertEquals(3, Translator.tagSlot(k));
    assertTrue(Translator.isScaleGroup(Translator.SCALE_GROUP_BASE));
    assertTrue(Translator.isScaleGroup(Translator.SCALE_GROUP_BASE + 4095));
    assertTrue(!Translator.isScaleGroup(Translator.SCALE_GROUP_BASE + 4096));
    assertTrue(!Translator.isScaleGroup(7));
  }

  @Test
  void outputToAScaledPortIsTheSelectGroupAndTagsItsRemoteInstances() throws OfError {
    Translator tr = t(with(new Loc("host", 200), new Loc("snic0", 201)));
    List<PhysRule> ps = tr.rule(rule(0, 10, inPort(2), apply(out(V), out(4))));
    assertEquals(1, ps.size());
    assertEquals("host", ps.get(0).sw());
    assertEquals(
        List.of(F.actions().group(OFGroup.of(G)), out(101)),
        actions(ps.get(0)),
        "group on a copy, the next action sees the packet unchanged");
    // The host's rule holds the tag of slot 1 (on snic0) only.
    assertEquals(Map.of(Translator.tagKey(V, 1), 1), tags.live());
    List<OFBucket> host =
        tr.scaleBuckets(
                with(new Loc("host", 200), new Loc("snic0", 201)).get(V).get(), "host", tags::tagOf)
            .orElseThrow();
    assertEquals(2, host.size());
    assertEquals(List.of(out(200)), bucket(host.get(0)));
    assertEquals(tagTo(tag(1), 1), bucket(host.get(1)), "no pop: each bucket has its own copy");
    assertTrue(host.stream().allMatch(b -> b.getWeight() == 1));
    // No rule on snic0 sends to V: slot 0's tag is not live, so no group there.
    assertEquals(
        Optional.empty(),
        tr.scaleBuckets(
            with(new Loc("host", 200), new Loc("snic0", 201)).get(V).get(), "snic0", tags::tagOf));
  }

  @Test
  void eachBucketCarriesItsInstancesWeight() throws OfError {
    List<Loc> inst = List.of(new Loc("host", 200), new Loc("snic0", 201), new Loc("host", 202));
    PortMap pm = PORTS.with(VPort.of(V, "nf", inst, List.of(100, 250, 65535)));
    Translator tr = t(pm);
    tr.rule(rule(0, 10, inPort(2), apply(out(V))));
    List<OFBucket> b = tr.scaleBuckets(pm.get(V).get(), "host", tags::tagOf).orElseThrow();
    assertEquals(List.of(100, 250, 65535), b.stream().map(OFBucket::getWeight).toList());
    assertEquals(List.of(out(200)), bucket(b.get(0)));
    assertEquals(List.of(out(202)), bucket(b.get(2)));
    // Without weights every bucket weighs 1 (the hash alone decides).
    assertTrue(
        tr
            .scaleBuckets(with(inst.toArray(Loc[]::new)).get(V).get(), "host", tags::tagOf)
            .orElseThrow()
            .stream()
            .allMatch(x -> x.getWeight() == 1));
  }

  @Test
  void weightsAreValidatedAgainstTheInstances() {
    List<Loc> two = List.of(new Loc("host", 200), new Loc("snic0", 201));
    for (List<Integer> bad :
        List.of(List.of(1), List.of(1, 2, 3), List.of(0, 1), List.of(1, 65536))) {
      try {
        VPort.of(V, "nf", two, bad);
        throw new AssertionError("accepted " + bad);
      } catch (IllegalArgumentException expected) {
        // refused
      }
    }
    assertEquals(List.of(1, 1), VPort.of(V, "nf", two).weights());
    assertTrue(VPort.of(V, "nf", two, List.of(7, 7)).evenWeights());
  }

  @Test
  void fourInstancesOverHostAndBothSnicsEachReachedByItsOwnTag() throws OfError {
    PortMap pm =
        with(
            new Loc("host", 200),
            new Loc("snic0", 201),
            new Loc("host", 202),
            new Loc("snic1", 203));
    Translator tr = t(pm);
    // From the wire of snic0 (V1): every instance not on snic0 is behind the host.
    List<PhysRule> ps = tr.rule(rule(0, 10, inPort(1), apply(out(V))));
    assertEquals(List.of(F.actions().group(OFGroup.of(G))), actions(ps.get(0)));
    List<OFBucket> b = tr.scaleBuckets(pm.get(V).get(), "snic0", tags::tagOf).orElseThrow();
    assertEquals(tagTo(tag(0), 100), bucket(b.get(0)));
    assertEquals(List.of(out(201)), bucket(b.get(1)));
    assertEquals(tagTo(tag(2), 100), bucket(b.get(2)));
    assertEquals(tagTo(tag(3), 100), bucket(b.get(3)));
    assertEquals(3, tags.live().size(), "slots 0, 2, 3");
    // Dispatch: each slot's tag goes to its own instance, from every PCIe side.
    List<PhysRule> d = tr.dispatch(tags.live());
    assertEquals(
        List.of(F.actions().popVlan(), out(202)),
        actions(tagRule(d, "host", 1, tag(2))),
        "host instance 202 delivered from snic0");
    assertEquals(
        List.of(out(2)), actions(tagRule(d, "host", 1, tag(3))), "slot 3 sent on to snic1");
    assertEquals(
        List.of(F.actions().popVlan(), out(203)), actions(tagRule(d, "snic1", 100, tag(3))));
    assertEquals(
        List.of(F.actions().output(OFPort.IN_PORT, 0xffff)),
        actions(tagRule(d, "snic0", 100, tag(3))),
        "a frame for slot 3 reaching snic0 goes back to the host");
    // Every instance port enters the pipeline.
    for (Loc l : pm.get(V).get().instances()) {
      assertTrue(
          d.stream()
              .anyMatch(
                  r ->
                      r.sw().equals(l.sw())
                          && r.priority() == Translator.PRIO_PORT
                          && r.match().get(MatchField.IN_PORT).equals(OFPort.of(l.port()))),
          l.toString());
    }
  }

  private static PhysRule tagRule(List<PhysRule> d, String sw, int in, int tag) {
    return d.stream()
        .filter(r -> r.sw().equals(sw) && r.priority() == Translator.PRIO_TAG)
        .filter(r -> r.match().get(MatchField.IN_PORT).equals(OFPort.of(in)))
        .filter(r -> r.match().get(MatchField.VLAN_VID).equals(OFVlanVidMatch.ofVlan(tag)))
        .findFirst()
        .orElseThrow(() -> new AssertionError(sw + " in " + in + " tag " + tag + " in " + d));
  }

  @Test
  void aSlotBeyondTheInstancesLingersTowardSlotModK() throws OfError {
    tags.acquire(Translator.tagKey(V, 0));
    tags.acquire(Translator.tagKey(V, 1));
    tags.acquire(Translator.tagKey(V, 2)); // a removed third instance, its tag still live
    Translator tr = t(with(new Loc("host", 200), new Loc("snic0", 201)));
    List<PhysRule> d = tr.dispatch(tags.live());
    assertEquals(
        List.of(F.actions().popVlan(), out(200)),
        actions(tagRule(d, "host", 1, tag(2))),
        "slot 2 mod 2 = slot 0, on the host");
  }

  @Test
  void aRemovedSlotGoesToItsLeavingPortWhileThatDrains() throws OfError {
    tags.acquire(Translator.tagKey(V, 0));
    tags.acquire(Translator.tagKey(V, 1));
    tags.acquire(Translator.tagKey(V, 2)); // the third instance, snic0:202, left by a shrink
    Loc leaving = new Loc("snic0", 202);
    PortMap pm =
        with(new Loc("host", 200), new Loc("snic0", 201))
            .withDrains(List.of(new Drain(V, leaving, 5000, false, 2)));
    List<PhysRule> d = t(pm).dispatch(tags.live());
    // A frame tagged for slot 2 before the shrink belongs to a flow whose earlier frames the
    // leaving instance has: it goes there, not to slot 2 mod 2 (the host), where it arrived
    // after later ones.
    assertEquals(
        List.of(F.actions().popVlan(), out(202)),
        actions(tagRule(d, "snic0", 100, tag(2))),
        "delivered to the leaving instance on snic0");
    assertEquals(
        List.of(F.actions().output(OFPort.IN_PORT, 0xffff)),
        actions(tagRule(d, "host", 1, tag(2))),
        "at the host, from snic0: back toward it");
    assertEquals(List.of(out(1)), actions(tagRule(d, "host", 2, tag(2))), "from snic1: to snic0");
    assertEquals(
        List.of(F.actions().output(OFPort.IN_PORT, 0xffff)),
        actions(tagRule(d, "snic1", 100, tag(2))),
        "snic1 sends it back to the host");
    // The slots still served and the drain without a slot (a remap's) are unchanged.
    assertEquals(
        List.of(F.actions().popVlan(), out(201)), actions(tagRule(d, "snic0", 100, tag(1))));
    List<PhysRule> noSlot =
        t(with(new Loc("host", 200), new Loc("snic0", 201))
                .withDrains(List.of(new Drain(V, leaving, 5000))))
            .dispatch(tags.live());
    assertEquals(
        List.of(F.actions().popVlan(), out(200)),
        actions(tagRule(noSlot, "host", 1, tag(2))),
        "a drain that held no known slot: slot mod k as before");
  }

  @Test
  void inPortOfAScaledPortIsReplicatedPerInstanceAndOutputBackIsTheDroppedInPort() throws OfError {
    Translator tr = t(with(new Loc("host", 200), new Loc("snic0", 201), new Loc("snic0", 202)));
    List<PhysRule> ps = tr.rule(rule(0, 10, inPort(V), apply(out(2), out(V))));
    assertEquals(3, ps.size());
    assertEquals("host", ps.get(0).sw());
    assertEquals(OFPort.of(200), ps.get(0).match().get(MatchField.IN_PORT));
    assertEquals(List.of(out(100), out(200)), actions(ps.get(0)));
    assertEquals("snic0", ps.get(1).sw());
    assertEquals(OFPort.of(201), ps.get(1).match().get(MatchField.IN_PORT));
    assertEquals(
        List.of(
            F.actions().pushVlan(EthType.VLAN_FRAME),
            F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tags.tagOf(2).getAsInt()))),
            out(100),
            F.actions().popVlan(),
            out(201)),
        actions(ps.get(1)));
    assertEquals(OFPort.of(202), ps.get(2).match().get(MatchField.IN_PORT));
    assertTrue(tags.tagOf(Translator.tagKey(V, 0)).isEmpty(), "no group use: no instance tag");
  }

  @Test
  void floodFromAPortOfKnownIngressUsesTheGroupOnceAndSkipsItsOwnPort() throws OfError {
    Translator tr = t(with(new Loc("host", 200), new Loc("snic0", 201)));
    List<PhysRule> ps =
        tr.rule(rule(0, 10, inPort(2), apply(F.actions().output(OFPort.FLOOD, 0xffff))));
    assertEquals(
        1,
        actions(ps.get(0)).stream()
            .filter(a -> a.equals(F.actions().group(OFGroup.of(G))))
            .count());
    ps = tr.rule(rule(0, 10, inPort(V), apply(F.actions().output(OFPort.FLOOD, 0xffff))));
    for (PhysRule p : ps) {
      assertTrue(
          actions(p).stream().noneMatch(a -> a.getType().name().equals("GROUP")),
          "from V itself: never back to another instance of V " + p);
    }
  }

  @Test
  void unfaithfulCasesAreRefused() {
    Translator tr = t(with(new Loc("host", 200), new Loc("snic0", 201)));
    Match any = F.buildMatch().build();
    OfError e =
        assertOfError("BadAction/BAD_OUT_PORT", () -> tr.rule(rule(0, 1, any, apply(out(V)))));
    assertTrue(e.getMessage().contains("in_port"), e.getMessage());
    assertOfError(
        "BadAction/BAD_OUT_PORT",
        () -> tr.rule(rule(0, 1, any, apply(F.actions().output(OFPort.FLOOD, 0xffff)))));
  }

  @Test
  void packetInFromAnyInstanceIsTheVport() {
    Translator tr = t(with(new Loc("host", 200), new Loc("snic0", 201)));
    OFPacketIn pin =
        F.buildPacketIn()
            .setBufferId(OFBufferId.NO_BUFFER)
            .setReason(OFPacketInReason.ACTION)
            .setTableId(TableId.of(1))
            .setCookie(U64.of(9))
            .setMatch(inPort(201))
            .setData(new byte[60])
            .build();
    assertEquals(
        OFPort.of(V),
        tr.packetIn("snic0", pin, U64.of(5)).orElseThrow().getMatch().get(MatchField.IN_PORT));
    assertEquals(
        OFPort.of(V),
        tr.packetIn("host", pin.createBuilder().setMatch(inPort(200)).build(), U64.of(5))
            .orElseThrow()
            .getMatch()
            .get(MatchField.IN_PORT));
    assertTrue(tr.packetIn("host", pin, U64.of(5)).isEmpty(), "host port 201 is no instance");
  }

  @Test
  void aControllerGroupBucketToAScaledPortChainsToTheSelectGroupForRulesOfAnotherInPort()
      throws OfError {
    PortMap pm = with(new Loc("host", 200), new Loc("snic0", 201));
    VirtualGroup g =
        new VirtualGroup(
            7,
            OFGroupType.ALL,
            List.of(
                F.buildBucket().setActions(List.of(out(V))).build(),
                F.buildBucket().setActions(List.of(out(4))).build()));
    Translator tr =
        new Translator(
            TOPO, pm, 252, tags::acquire, id -> id == 7, Map.of(V, G), id -> id == 7 ? g : null);
    List<OFBucket> host = tr.buckets(g, "host");
    assertEquals(List.of(F.actions().group(OFGroup.of(G))), bucket(host.get(0)));
    assertEquals(List.of(out(101)), bucket(host.get(1)));
    assertTrue(
        tags.tagOf(Translator.tagKey(V, 1)).isPresent(), "the chained group's remote bucket");
    // A rule using the group from another in_port is faithful; without in_port or from V it is not.
    List<PhysRule> ok = tr.rule(rule(0, 10, inPort(2), apply(F.actions().group(OFGroup.of(7)))));
    assertEquals(List.of(F.actions().group(OFGroup.of(7))), actions(ok.get(0)));
    for (Match m : List.of(F.buildMatch().build(), inPort(V))) {
      OfError e =
          assertOfError(
              "BadAction/BAD_OUT_PORT",
              () -> tr.rule(rule(0, 10, m, apply(F.actions().group(OFGroup.of(7))))));
      assertTrue(e.getMessage().contains("in_port other than 200"), e.getMessage());
    }
    // Its own VLAN push in a bucket whose chained group may cross PCIe: refused as for a tag.
    VirtualGroup vlan =
        new VirtualGroup(
            8,
            OFGroupType.ALL,
            List.of(
                F.buildBucket()
                    .setActions(List.of(F.actions().pushVlan(EthType.VLAN_FRAME), out(V)))
                    .build()));
    assertOfError("GroupModFailed/BAD_BUCKET", () -> tr.buckets(vlan, "host"));
  }
}
