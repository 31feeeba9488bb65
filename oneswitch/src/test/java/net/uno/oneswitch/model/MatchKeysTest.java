package net.uno.oneswitch.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import net.uno.oneswitch.translate.Fixtures;
import net.uno.oneswitch.translate.MatchUtil;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.OFPort;

class MatchKeysTest {
  private static Match m(int inPort, boolean ip) {
    var b = Fixtures.F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(inPort));
    if (ip) {
      b.setExact(MatchField.ETH_TYPE, EthType.IPv4);
    }
    return b.build();
  }

  @Test
  void remembersTheCanonicalKeyAndStaysBounded() {
    assertEquals(MatchUtil.key(m(5, true)), MatchKeys.of(m(5, true)));
    assertEquals(MatchKeys.of(m(5, true)), MatchKeys.of(m(5, true)), "an equal match: same key");
    assertNotEquals(MatchKeys.of(m(5, true)), MatchKeys.of(m(5, false)));
    for (int i = 0; i < MatchKeys.MAX + 10; i++) {
      MatchKeys.of(m(1000 + i, i % 2 == 0)); // far more matches than kept: the oldest go
    }
    assertEquals(MatchUtil.key(m(5, true)), MatchKeys.of(m(5, true)), "recomputed after eviction");
    assertEquals(
        new PhysRule("host", 1, 9, m(7, true), java.util.List.of()).key().match(),
        MatchUtil.key(m(7, true)));
  }

  @Test
  void sameObjectAndIdentitySlotsGiveTheMatchesOwnKey() {
    Match a = m(6, true);
    String k = MatchKeys.of(a);
    assertEquals(MatchUtil.key(a), k);
    assertEquals(k, MatchKeys.of(a), "the same object again (identity table)");
    // Far more objects than identity slots: every slot is overwritten by other matches, some by
    // matches equal to earlier ones; each still gets its own key.
    java.util.List<Match> all = new java.util.ArrayList<>();
    for (int i = 0; i < 4 * MatchKeys.RECENT; i++) {
      all.add(m(2000 + i % 3000, i % 3 == 0));
    }
    for (Match x : all) {
      assertEquals(MatchUtil.key(x), MatchKeys.of(x));
    }
    for (Match x : all) {
      assertEquals(MatchUtil.key(x), MatchKeys.of(x), "looked up again");
    }
    assertEquals(MatchUtil.key(a), MatchKeys.of(a), "the first object after its slot was reused");
  }
}
