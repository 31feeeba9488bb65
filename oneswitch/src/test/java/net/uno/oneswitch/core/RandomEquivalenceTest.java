package net.uno.oneswitch.core;

import static net.uno.oneswitch.translate.Fixtures.F;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.oftable.FakeOfTable;
import net.uno.oneswitch.oftable.Frame;
import net.uno.oneswitch.translate.Carrier;
import net.uno.oneswitch.translate.Fixtures;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.opentest4j.AssertionFailedError;
import org.projectfloodlight.openflow.protocol.OFFlowMod;
import org.projectfloodlight.openflow.protocol.OFGroupMod;
import org.projectfloodlight.openflow.protocol.action.OFAction;
import org.projectfloodlight.openflow.protocol.action.OFActionOutput;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions;
import org.projectfloodlight.openflow.types.OFPort;

/**
 * Property-style checks of the translation: seeded random rule sets ({@link RandomRules}, many
 * families) installed through the core, then random and standard frames into every vport must fare
 * the same on the fake virtual switch and the fake physical ones ({@link Equivalence}), also after
 * remaps, a scale-out and with QinQ from the wire. Refused rules are fine (fail closed); a
 * difference is not. Each set must keep enough accepted and exercised rules to mean something.
 */
class RandomEquivalenceTest extends EquivalenceHarness {
  private static final int RULES = 45;
  private static final int FRAMES = 80;

  RandomEquivalenceTest() {
    super(20);
  }

  /** Installs a random set (groups first, then rules, some deleted again); returns its frames. */
  private List<Frame> install(long seed, int wireVlans) throws Exception {
    start(Carrier.Mode.AUTO, wireVlans);
    RandomRules gen = new RandomRules(seed, 4, wireVlans);
    for (OFGroupMod g : gen.groups()) {
      eq.groupMod(g);
    }
    List<OFFlowMod> added = new ArrayList<>();
    for (int i = 0; i < RULES; i++) {
      OFFlowMod fm = gen.rule();
      if (eq.flowMod(fm)) {
        added.add(fm);
      }
      if (!added.isEmpty() && i % 9 == 8) {
        OFFlowMod victim = added.remove((int) (seed + i) % added.size());
        eq.flowMod(
            F.buildFlowDeleteStrict()
                .setTableId(victim.getTableId())
                .setPriority(victim.getPriority())
                .setMatch(victim.getMatch())
                .build());
      }
    }
    List<Frame> frames = new ArrayList<>(gen.frames(FRAMES));
    frames.addAll(Equivalence.standardFrames(wireVlans));
    return frames;
  }

  private void checkMeaningful(long seed, List<Frame> frames) throws Exception {
    int hit = eq.check(frames);
    hit = Math.max(hit, eq.checkInRounds(frames));
    String stats =
        "seed "
            + seed
            + ": "
            + eq.accepted()
            + " rules accepted, "
            + eq.refused().size()
            + " refused, "
            + hit
            + " exercised";
    assertTrue(eq.accepted() >= RULES / 3, stats + "; refused: " + eq.refused());
    assertTrue(hit >= 10, stats);
  }

  @ParameterizedTest
  @ValueSource(longs = {1, 2, 3, 4, 5, 6, 7, 8})
  void randomRuleSetsFareTheSameOnTheVirtualAndThePhysicalSwitches(long seed) throws Exception {
    checkMeaningful(seed, install(seed, 1));
  }

  @ParameterizedTest
  @ValueSource(longs = {11, 12, 13, 14})
  void withQinqFromTheWireToo(long seed) throws Exception {
    checkMeaningful(seed, install(seed, 2));
  }

  @ParameterizedTest
  @ValueSource(longs = {21, 22, 23, 24})
  void andAfterEachRemapAndAScaleOut(long seed) throws Exception {
    List<Frame> frames = install(seed, 1);
    assertTrue(eq.check(frames) >= 0);
    for (VPort.Loc to :
        List.of(new VPort.Loc("snic1", 7), new VPort.Loc("snic0", 8), new VPort.Loc("host", 101))) {
      boolean moved = remap(4, to);
      if (moved) {
        eq.check(frames);
      }
    }
    List<VPort.Loc> two = List.of(new VPort.Loc("host", 100), new VPort.Loc("snic1", 9));
    try {
      on(() -> core.portChanges().setInstances(2, two)).get(10, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      // A rule that cannot be carried with two instances (409 instances): nothing changed.
      assertTrue(e.getCause() instanceof PortError, e.toString());
    }
    checkMeaningful(seed, frames);
  }

  /** Remaps vport {@code v}; false if refused (a rule could not be carried there). */
  private boolean remap(int v, VPort.Loc to) throws Exception {
    try {
      on(() -> core.portChanges().remapPort(v, to.sw(), to.port(), 0)).get(10, TimeUnit.SECONDS);
      return true;
    } catch (java.util.concurrent.ExecutionException e) {
      if (e.getCause() instanceof PortError) {
        return false;
      }
      throw e;
    }
  }

  @ParameterizedTest
  @ValueSource(longs = {1, 2})
  void theCheckFindsAWrongTranslation(long seed) throws Exception {
    List<Frame> frames = install(seed, 1);
    Equivalence.Snapshot s = eq.new Snapshot();
    // Re-point one replica's first output to a vport to another mapped port of its switch.
    boolean broken = false;
    for (FakeOfTable t : s.physical.values()) {
      for (FakeOfTable.Flow f : t.flows()) {
        if (broken || f.owner() == null) {
          continue;
        }
        List<OFInstruction> ins = new ArrayList<>();
        for (OFInstruction i : f.instructions()) {
          if (!broken && i instanceof OFInstructionApplyActions a) {
            List<OFAction> acts = new ArrayList<>(a.getActions());
            for (int k = 0; k < acts.size() && !broken; k++) {
              if (acts.get(k) instanceof OFActionOutput o && mapped(t.name(), o.getPort())) {
                acts.set(k, F.actions().output(OFPort.of(0xfff0), 0xffff));
                broken = true;
              }
            }
            ins.add(F.instructions().applyActions(acts));
          } else {
            ins.add(i);
          }
        }
        if (broken) {
          t.addFlow(f.table(), f.priority(), f.match(), ins, f.owner());
        }
      }
    }
    assertTrue(broken, "a replica with an output to a vport");
    assertThrows(
        AssertionFailedError.class,
        () -> {
          for (Frame fr : frames) {
            for (int v = 1; v <= 4; v++) {
              s.same(v, fr);
            }
          }
          s.sameCounters();
        });
  }

  private boolean mapped(String sw, OFPort p) {
    return Equivalence.vportOf(Fixtures.PORTS).containsKey(new VPort.Loc(sw, p.getPortNumber()));
  }
}
