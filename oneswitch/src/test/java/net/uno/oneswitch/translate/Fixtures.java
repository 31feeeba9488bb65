package net.uno.oneswitch.translate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import org.junit.jupiter.api.function.Executable;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFVlanVidMatch;

/**
 * Test topology: host (PCIe ports 1 -> snic0, 2 -> snic1), snic0 and snic1 (PCIe port 100 each). V1
 * = snic0:1, V2 = host:100, V3 = snic1:1, V4 = host:101.
 */
public final class Fixtures {
  public static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);
  public static final Topology TOPO =
      new Topology(
          "host",
          List.of("host", "snic0", "snic1"),
          List.of(new Topology.Pcie("snic0", 1, 100), new Topology.Pcie("snic1", 2, 100)));
  public static final PortMap PORTS =
      new PortMap(
          List.of(
              new VPort(1, "snic0", 1, "eth0"),
              new VPort(2, "host", 100, "vm0"),
              new VPort(3, "snic1", 1, "eth1"),
              new VPort(4, "host", 101, "vm1")));

  private Fixtures() {}

  /** A translator with a fresh allocator: tag of vport V is allocated in first-use order. */
  public static Translator translator(TagAllocator tags, PortMap pm) {
    return new Translator(TOPO, pm, 252, tags::acquire, g -> g == 7);
  }

  public static VirtualRule rule(int table, int prio, Match m, List<OFInstruction> ins) {
    return new VirtualRule(table, prio, m, ins, 0, 0, 0, Set.of(), 0);
  }

  public static List<OFInstruction> apply(OFAction... a) {
    return List.of(F.instructions().applyActions(List.of(a)));
  }

  public static OFAction out(int p) {
    return F.actions().output(OFPort.of(p), 0xffff);
  }

  /** A group bucket of actions {@code a}, watching no port or group. */
  public static OFBucket bucket(OFAction... a) {
    return F.buildBucket()
        .setActions(List.of(a))
        .setWatchGroup(OFGroup.ANY)
        .setWatchPort(OFPort.ANY)
        .build();
  }

  /** The actions of a tagged send: push tag, output to the PCIe port, pop tag. */
  public static List<OFAction> tagged(int tag, int pcie) {
    List<OFAction> l = new ArrayList<>();
    l.add(F.actions().pushVlan(EthType.VLAN_FRAME));
    l.add(F.actions().setField(F.oxms().vlanVid(OFVlanVidMatch.ofVlan(tag))));
    l.add(out(pcie));
    l.add(F.actions().popVlan());
    return l;
  }

  /**
   * Asserts that {@code call} fails with the OpenFlow error {@code typeAndCode} (e.g. {@code
   * "BadAction/UNSUPPORTED_ORDER"}) and returns it.
   */
  public static OfError assertOfError(String typeAndCode, Executable call) {
    OfError e = assertThrows(OfError.class, call);
    assertEquals(typeAndCode, e.typeAndCode());
    return e;
  }
}
