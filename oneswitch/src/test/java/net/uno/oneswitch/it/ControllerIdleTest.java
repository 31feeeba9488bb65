package net.uno.oneswitch.it;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;

/**
 * A controller that stays silent is disconnected after {@code controller_idle_ms}, except while it
 * waits for a reply OneSwitch owes it (ovs-ofctl answers no echo while a long bundle commit or
 * barrier is applied: it used to be cut off after 30 s and saw "End of file").
 */
class ControllerIdleTest {
  private static final OFFactory F = FakeSwitch.F;

  @Test
  void aControllerWaitingForAReplyIsKeptASilentOneIsClosed() throws Exception {
    try (TwoSwitches fx = TwoSwitches.options().top("\"controller_idle_ms\": 1200, ").create()) {
      fx.start();
      try (OfClient c = fx.client()) {
        fx.host.holdBarriers();
        // A rule from the wire (snic0) to a VM (host): the barrier must wait for the host's answer.
        c.send(
            F.buildFlowAdd()
                .setXid(6)
                .setTableId(TableId.of(0))
                .setPriority(10)
                .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(1)).build())
                .setInstructions(
                    List.of(
                        F.instructions()
                            .applyActions(List.of(F.actions().output(OFPort.of(2), 0xffff)))))
                .build());
        c.send(F.buildBarrierRequest().setXid(7).build());
        assertNull(c.expect(OFType.BARRIER_REPLY, 7, 500), "answered before the host's barrier");
        Thread.sleep(3000); // 2.5 idle times of silence, a reply owed
        fx.host.releaseBarriers();
        assertNotNull(c.expect(OFType.BARRIER_REPLY, 7, 10_000), "kept while it waited");
        long end = System.currentTimeMillis() + 10_000;
        boolean closed = false;
        while (!closed && System.currentTimeMillis() < end) {
          try {
            c.read(500); // never answers OneSwitch's echoes
          } catch (IOException eof) {
            closed = true;
          }
        }
        assertTrue(closed, "a silent controller owed nothing is disconnected");
      }
    }
  }
}
