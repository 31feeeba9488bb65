package net.uno.oneswitch.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;

/**
 * The journal's writer thread with a real file: what {@link JournalWriter#written} promises is on
 * disk when it completes; a snapshot empties the journal and what follows it is journaled after;
 * close writes what was queued.
 */
class JournalWriterTest {
  private static final OFFactory F = OneSwitchCore.F;
  @TempDir Path dir;
  private final ExecutorService core = Executors.newSingleThreadExecutor();

  @AfterEach
  void stop() {
    core.shutdownNow();
  }

  private static VirtualRule rule(int prio) {
    OFFlowAdd f =
        F.buildFlowAdd()
            .setTableId(TableId.of(0))
            .setPriority(prio)
            .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(1)).build())
            .setInstructions(
                List.of(
                    F.instructions().applyActions(List.of(F.actions().output(OFPort.of(2), 0)))))
            .build();
    return VirtualRule.of(f, 0, 0);
  }

  private <T> T onCore(java.util.concurrent.Callable<T> c) throws Exception {
    return core.submit(c).get(10, TimeUnit.SECONDS);
  }

  private static List<Integer> priorities(Persistence.State st) {
    return st.flows().stream().map(m -> ((OFFlowAdd) m).getPriority()).toList();
  }

  @Test
  void whatWrittenCoversIsOnDiskWhenItCompletes() throws Exception {
    Persistence p = new Persistence(dir);
    JournalWriter w = new JournalWriter(p, F, core);
    for (int round = 0; round < 20; round++) {
      int base = round * 10;
      CompletableFuture<Void> f =
          onCore(
              () -> {
                for (int i = 0; i < 10; i++) {
                  w.append(List.of(new JournalWriter.Flow(rule(base + i), false)));
                }
                return w.written();
              });
      f.get(10, TimeUnit.SECONDS);
      // Read by another reader, as after a crash: every rule handed over is there.
      assertEquals(base + 10, new Persistence(dir).load().flows().size());
    }
    w.close();
  }

  @Test
  void aSnapshotEmptiesTheJournalAndLaterChangesFollowIt() throws Exception {
    Persistence p = new Persistence(dir);
    JournalWriter w = new JournalWriter(p, F, core);
    List<VPort> ports = List.of(new VPort(1, "host", 100, "vm0"));
    CompletableFuture<Void> saved =
        onCore(
            () -> {
              w.append(List.of(new JournalWriter.Flow(rule(1), false)));
              w.append(List.of(new JournalWriter.Ports(ports)));
              return w.save(
                  new JournalWriter.Snapshot(ports, new ArrayList<>(List.of(rule(1))), List.of()));
            });
    saved.get(10, TimeUnit.SECONDS);
    assertEquals(0, Files.size(p.journalFile()), "the snapshot holds all the journal said");
    CompletableFuture<Void> f =
        onCore(
            () -> {
              w.append(List.of(new JournalWriter.Flow(rule(1), true))); // removed
              w.append(List.of(new JournalWriter.Flow(rule(2), false)));
              return w.written();
            });
    f.get(10, TimeUnit.SECONDS);
    Persistence.State st = new Persistence(dir).load();
    assertEquals(List.of(2), priorities(st));
    assertEquals("host", st.ports().get(0).sw());
    w.close();
  }

  @Test
  void closeWritesWhatWasQueued() throws Exception {
    Persistence p = new Persistence(dir);
    JournalWriter w = new JournalWriter(p, F, core);
    onCore(
        () -> {
          for (int i = 0; i < 500; i++) {
            w.append(List.of(new JournalWriter.Flow(rule(i), false)));
          }
          return null;
        });
    w.close();
    assertEquals(500, new Persistence(dir).load().flows().size());
    assertTrue(Files.size(p.journalFile()) > 0);
  }

  /**
   * Acknowledgements in a row, some waiting for the writer's thread, some written by the core
   * itself: every one completes (one left waiting would hold a BARRIER_REPLY forever).
   */
  @Test
  void everyAcknowledgementCompletesWhoeverWrites() throws Exception {
    Persistence p = new Persistence(dir);
    JournalWriter w = new JournalWriter(p, F, core);
    List<CompletableFuture<Void>> acks = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      int prio = i;
      acks.add(
          onCore(
              () -> {
                w.append(List.of(new JournalWriter.Flow(rule(prio), false)));
                if (prio % 50 == 0) {
                  w.save(new JournalWriter.Snapshot(List.of(), List.of(rule(prio)), List.of()));
                }
                return w.written();
              }));
    }
    CompletableFuture.allOf(acks.toArray(CompletableFuture[]::new)).get(20, TimeUnit.SECONDS);
    w.close();
  }
}
