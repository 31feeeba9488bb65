package net.uno.oneswitch.it;

import static net.uno.oneswitch.it.Wait.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.uno.oneswitch.Main;
import net.uno.oneswitch.core.PhysicalState;
import net.uno.oneswitch.translate.Translator;
import net.uno.oneswitch.translate.WriteActionSet;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFConfigFlags;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowDelete;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.OFGroupType;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFSetConfig;
import org.projectfloodlight.openflow.protocol.OFType;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * A shared switch (config {@code shared: true}: an operator's bridge, as a BlueField DPU's) keeps
 * every flow and group that is not OneSwitch's across connect, reconcile and reconnect, while
 * OneSwitch's own leftovers (marked cookies of an earlier run, groups in its reserved ranges) are
 * deleted, and its fragment handling is left as it is. The host switch (not shared) is reconciled
 * as before: everything not OneSwitch's goes.
 *
 * <p>Vports: 1 = snic0:1 (a wire port), 2 = host:100. The sNIC's port 300 is the operator's (not
 * mapped).
 */
class SharedSwitchTest {
  private static final OFFactory F = FakeSwitch.F;

  /** Cookies of an earlier OneSwitch run (its marker, other random bits). */
  private static final long OLD_RUN_1 = 0x55abcdef00000001L;

  private static final long OLD_RUN_2 = 0x55abcdef00000002L;

  private TwoSwitches fx;
  private FakeSwitch host;
  private FakeSwitch snic;
  private Main.Running os;

  /** The operator's flows and groups on the sNIC, as put there (cookie / id -> flow-mod). */
  private final Map<Long, OFFlowMod> operatorFlows = new java.util.HashMap<>();

  private final Map<Integer, OFGroupMod> operatorGroups = new java.util.HashMap<>();

  private static OFAction out(int p) {
    return F.actions().output(OFPort.of(p), 0xffff);
  }

  @BeforeEach
  void up() throws Exception {
    fx =
        TwoSwitches.options()
            .ports(List.of(1, 100), List.of(1, 100, 300))
            .snicExtra(", \"shared\": true")
            .create();
    host = fx.host;
    snic = fx.snic;
    // The operator's bridge, before OneSwitch ever connects: its catch-all (cookie 0, as OVS's own
    // NORMAL flow), a flow of its own in table 0 above OneSwitch's dispatch priorities (0x99), one
    // in a table OneSwitch does not use (0x1234), a group (7), its fragment handling.
    operatorFlows.put(
        0L, snic.addForeign(0, 0, 0, null, List.of(F.actions().output(OFPort.NORMAL, 0xffff))));
    operatorFlows.put(0x99L, snic.addForeign(0x99, 0, 300, 300, List.of(out(300))));
    operatorFlows.put(0x1234L, snic.addForeign(0x1234, 254, 1, 300, List.of(out(300))));
    operatorGroups.put(7, snic.addForeignGroup(7, 300));
    snic.configFlags = Set.of(OFConfigFlags.FRAG_DROP);
    host.configFlags = Set.of(OFConfigFlags.FRAG_DROP);
    // What an earlier OneSwitch run left there: marked flows, groups in its reserved ranges.
    snic.addForeign(OLD_RUN_1, 1, 10, 1, List.of(out(100)));
    snic.addForeign(OLD_RUN_2, 0, 100, 1, List.of(out(100)));
    snic.addForeignGroup(Translator.SCALE_GROUP_BASE + 3, 1);
    snic.addForeignGroup(WriteActionSet.CARRIER_GROUP_BASE + 5, 1);
    // The host switch is OneSwitch's own: someone else's flow and group there go.
    host.addForeign(0x99, 0, 300, 100, List.of(out(100)));
    host.addForeignGroup(7, 100);
    os = fx.start();
  }

  @AfterEach
  void down() throws Exception {
    fx.close();
  }

  private static void barrier(OfClient c, long xid) throws Exception {
    c.send(F.buildBarrierRequest().setXid(xid).build());
    assertNotNull(c.expect(OFType.BARRIER_REPLY, xid, 10000));
  }

  /**
   * A controller rule on the sNIC (in_port=1) and a barrier: once answered, the sNIC has processed
   * everything OneSwitch sent it before (the reconcile's deletes included).
   */
  private void settle(OfClient c, int prio, long xid) throws Exception {
    c.send(
        F.buildFlowAdd()
            .setXid(xid)
            .setTableId(TableId.of(0))
            .setPriority(prio)
            .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(1)).build())
            .setInstructions(List.of(F.instructions().applyActions(List.of(out(2)))))
            .build());
    barrier(c, xid + 1);
  }

  private static OFGroupMod group(boolean add, int id, int vport) {
    var b = add ? F.buildGroupAdd() : F.buildGroupDelete();
    b.setXid(40 + id).setGroup(OFGroup.of(id)).setGroupType(OFGroupType.ALL);
    if (add) {
      b.setBuckets(
          List.of(
              F.buildBucket()
                  .setWatchGroup(OFGroup.ANY)
                  .setWatchPort(OFPort.ANY)
                  .setActions(List.of(out(vport)))
                  .build()));
    }
    return b.build();
  }

  /** The operator's flows and groups on the sNIC are there, exactly as put there. */
  private void operatorsIntact(String when) {
    operatorFlows.forEach(
        (c, fm) ->
            assertEquals(
                fm,
                snic.flows.get(c),
                when + ": operator flow cookie 0x" + Long.toHexString(c) + " changed or gone"));
    operatorGroups.forEach(
        (g, gm) -> assertEquals(gm, snic.groups.get(g), when + ": operator group " + g));
  }

  /**
   * What OneSwitch sent the sNIC never touches a flow or group that is not its own: every flow
   * delete names one marked cookie exactly, no flow-mod has an unmarked cookie, no group-mod names
   * an operator's group.
   */
  private void onlyOwnTouched() {
    for (OFMessage m : snic.logSnapshot()) {
      if (m instanceof OFFlowMod fm) {
        long c = fm.getCookie().getValue();
        assertTrue(PhysicalState.owned(c), "flow-mod with a cookie not OneSwitch's: " + fm);
        if (fm instanceof OFFlowDelete) {
          assertEquals(U64.NO_MASK, fm.getCookieMask(), "a delete by exact cookie: " + fm);
        }
      } else if (m instanceof OFGroupMod gm) {
        assertFalse(
            operatorGroups.containsKey(gm.getGroup().getGroupNumber()),
            "group-mod of an operator's group: " + gm);
        assertFalse(gm.getGroup().equals(OFGroup.ALL), "group-mod of every group: " + gm);
      }
    }
  }

  @Test
  void aSharedSwitchKeepsWhatIsNotOneSwitchsAcrossConnectAndReconnect() throws Exception {
    try (OfClient c = fx.client()) {
      // Connected and reconciled: OneSwitch's dispatch is there, the earlier run's leftovers gone.
      waitFor(
          () ->
              !snic.flows.containsKey(OLD_RUN_1)
                  && !snic.flows.containsKey(OLD_RUN_2)
                  && snic.groups.size() == 1
                  && !host.flows.containsKey(0x99L)
                  && host.groups.isEmpty());
      settle(c, 10, 60);
      operatorsIntact("after connect");
      onlyOwnTouched();
      // OneSwitch's own flows there all carry its marker; its table-0 default drop is for the
      // PCIe port only (a catch-all would replace the operator's).
      List<OFFlowMod> ours =
          snic.flows.values().stream()
              .filter(f -> PhysicalState.owned(f.getCookie().getValue()))
              .toList();
      assertEquals(
          snic.flows.size() - operatorFlows.size(), ours.size(), "only marked flows added");
      assertTrue(
          ours.stream()
              .anyMatch(
                  f ->
                      f.getTableId().getValue() == 0
                          && f.getPriority() == 0
                          && OFPort.of(100).equals(f.getMatch().get(MatchField.IN_PORT))
                          && f.getInstructions().isEmpty()),
          "the PCIe port's default drop: " + ours);
      // The host (not shared) got OneSwitch's usual handshake; the sNIC's fragment handling was
      // asked for and given back unchanged with OneSwitch's miss_send_len.
      // (openflowj decodes flags 0 as {FRAG_NORMAL}: FRAG_DROP is the bit that tells.)
      assertFalse(host.configFlags.contains(OFConfigFlags.FRAG_DROP), "as before: reset");
      assertTrue(
          host.logSnapshot().stream().noneMatch(m -> m.getType() == OFType.GET_CONFIG_REQUEST));
      assertTrue(snic.configFlags.contains(OFConfigFlags.FRAG_DROP));
      List<OFMessage> log = snic.logSnapshot();
      int get = -1;
      int set = -1;
      for (int i = 0; i < log.size(); i++) {
        if (log.get(i).getType() == OFType.GET_CONFIG_REQUEST && get < 0) {
          get = i;
        } else if (log.get(i) instanceof OFSetConfig sc && set < 0) {
          set = i;
          assertEquals(0xffff, sc.getMissSendLen());
          assertTrue(sc.getFlags().contains(OFConfigFlags.FRAG_DROP), sc.toString());
        }
      }
      assertTrue(get >= 0 && get < set, "GET_CONFIG before SET_CONFIG: " + log);

      // The controller's groups: 7 (the operator's id on the sNIC) and 8.
      c.send(group(true, 7, 1));
      c.send(group(true, 8, 1));
      settle(c, 11, 62);
      waitFor(() -> host.groups.containsKey(7) && host.groups.containsKey(8));
      assertTrue(snic.groups.containsKey(8), "OneSwitch's group 8 on the sNIC");
      operatorsIntact("after the controller's group 7");

      // A reconnect: meanwhile another leftover of an earlier run and a new operator flow.
      int before = snic.connections();
      snic.disconnect();
      waitFor(() -> fx.onCore(() -> !os.core().south().get("snic0").isReady()));
      snic.addForeign(0x5500000100000009L, 3, 7, 1, List.of(out(100)));
      operatorFlows.put(0x77L, snic.addForeign(0x77, 0, 5, 300, List.of(out(300))));
      waitFor(() -> snic.connections() > before);
      waitFor(() -> !snic.flows.containsKey(0x5500000100000009L));
      settle(c, 12, 64);
      operatorsIntact("after a reconnect");
      onlyOwnTouched();
      assertEquals(
          snic.flows.size() - operatorFlows.size(),
          snic.flows.values().stream()
              .filter(f -> PhysicalState.owned(f.getCookie().getValue()))
              .count());

      // Group 8 is still OneSwitch's after the reconnect (it made it in this run): deleted when the
      // controller deletes it. The controller's 7 goes from the host, the operator's 7 stays.
      c.send(group(false, 8, 0));
      c.send(group(false, 7, 0));
      barrier(c, 66);
      waitFor(() -> !snic.groups.containsKey(8) && host.groups.isEmpty());
      settle(c, 13, 67);
      operatorsIntact("after the controller's group deletes");
      onlyOwnTouched();
      List<Integer> left = new ArrayList<>(snic.groups.keySet());
      assertEquals(List.of(7), left);
    }
  }

  @Test
  void aSwitchOfOneSwitchsOwnIsReconciledToExactlyOneSwitchsFlows() throws Exception {
    try (OfClient c = fx.client()) {
      waitFor(() -> !host.flows.containsKey(0x99L) && host.groups.isEmpty());
      barrier(c, 70);
      // Every flow left on the host is OneSwitch's; its table-0 default drop matches everything.
      assertTrue(
          host.flows.keySet().stream().allMatch(PhysicalState::owned), host.flows.toString());
      assertTrue(
          host.flows.values().stream()
              .anyMatch(
                  f ->
                      f.getTableId().getValue() == 0
                          && f.getPriority() == 0
                          && !f.getMatch().getMatchFields().iterator().hasNext()));
    }
  }
}
