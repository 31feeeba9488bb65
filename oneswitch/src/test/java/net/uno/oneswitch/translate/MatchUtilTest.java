package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.F;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.IPv4AddressWithMask;
import org.projectfloodlight.openflow.types.OFPort;

class MatchUtilTest {
  private static Match ip(String cidr) {
    var b = F.buildMatch().setExact(MatchField.ETH_TYPE, EthType.IPv4);
    IPv4AddressWithMask m = IPv4AddressWithMask.of(cidr);
    if (m.getMask().equals(IPv4Address.NO_MASK)) {
      b.setExact(MatchField.IPV4_SRC, m.getValue());
    } else {
      b.setMasked(MatchField.IPV4_SRC, m);
    }
    return b.build();
  }

  @Test
  void subset() {
    Match all = F.buildMatch().build();
    assertTrue(MatchUtil.isSubset(ip("10.0.0.1/32"), all));
    assertTrue(MatchUtil.isSubset(ip("10.0.0.1/32"), ip("10.0.0.0/8")));
    assertTrue(MatchUtil.isSubset(ip("10.1.0.0/16"), ip("10.0.0.0/8")));
    assertFalse(MatchUtil.isSubset(ip("10.0.0.0/8"), ip("10.1.0.0/16")));
    assertFalse(MatchUtil.isSubset(ip("11.0.0.1/32"), ip("10.0.0.0/8")));
    assertFalse(MatchUtil.isSubset(all, ip("10.0.0.0/8")));
  }

  @Test
  void overlap() {
    assertTrue(MatchUtil.overlaps(ip("10.0.0.0/8"), ip("10.1.2.3/32")));
    assertFalse(MatchUtil.overlaps(ip("10.0.0.0/8"), ip("11.0.0.0/8")));
    Match p1 = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(1)).build();
    Match p2 = F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(2)).build();
    assertFalse(MatchUtil.overlaps(p1, p2));
    assertTrue(MatchUtil.overlaps(p1, ip("10.0.0.0/8")));
  }

  @Test
  void keyIsOrderIndependentAndInPortRewrites() {
    Match a =
        F.buildMatch()
            .setExact(MatchField.IN_PORT, OFPort.of(1))
            .setExact(MatchField.ETH_TYPE, EthType.IPv4)
            .build();
    Match b =
        F.buildMatch()
            .setExact(MatchField.ETH_TYPE, EthType.IPv4)
            .setExact(MatchField.IN_PORT, OFPort.of(1))
            .build();
    assertEquals(MatchUtil.key(a), MatchUtil.key(b));
    assertEquals(OFPort.of(7), MatchUtil.withInPort(a, OFPort.of(7)).get(MatchField.IN_PORT));
    assertEquals(EthType.IPv4, MatchUtil.withInPort(a, OFPort.of(7)).get(MatchField.ETH_TYPE));
  }
}
