package net.uno.oneswitch.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import net.uno.oneswitch.model.VPort;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;

/** The journal replayed onto state.json: what each line does, a cut last line, a corrupt one. */
class PersistenceJournalTest {
  private static final OFFactory F = OneSwitchCore.F;
  @TempDir Path dir;

  private static OFFlowAdd flow(int prio, int inPort, int out) {
    return F.buildFlowAdd()
        .setTableId(TableId.of(0))
        .setPriority(prio)
        .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(inPort)).build())
        .setInstructions(
            List.of(F.instructions().applyActions(List.of(F.actions().output(OFPort.of(out), 0)))))
        .build();
  }

  private static List<Integer> outs(Persistence.State st) {
    return st.flows().stream()
        .map(m -> (OFFlowAdd) m)
        .map(f -> f.getPriority() * 100 + outPort(f))
        .toList();
  }

  private static int outPort(OFFlowAdd f) {
    var aa =
        (org.projectfloodlight.openflow.protocol.instruction.OFInstructionApplyActions)
            f.getInstructions().get(0);
    return ((org.projectfloodlight.openflow.protocol.action.OFActionOutput) aa.getActions().get(0))
        .getPort()
        .getPortNumber();
  }

  @Test
  void journalLinesReplayOntoTheSavedState() throws IOException {
    Persistence p = new Persistence(dir);
    List<VPort> ports = List.of(new VPort(1, "host", 100, "vm0"));
    p.save(ports, List.<OFMessage>of(flow(10, 1, 2), flow(11, 1, 3)), List.of());
    p.append(
        "F "
            + Persistence.hex(flow(10, 1, 4))
            + "\n" // modified in place
            + "D "
            + Persistence.hex(flow(11, 1, 3))
            + "\n"
            + "F "
            + Persistence.hex(flow(12, 2, 2))
            + "\n"
            + Persistence.portsLine(List.of(new VPort(1, "snic0", 200, "vm0"))));
    Persistence.State st = new Persistence(dir).load();
    assertEquals(List.of(1004, 1202), outs(st));
    assertEquals("snic0", st.ports().get(0).sw());
    p.save(st.ports(), st.flows(), st.groups()); // compaction empties the journal
    assertEquals(0, Files.size(p.journalFile()));
    assertEquals(List.of(1004, 1202), outs(new Persistence(dir).load()));
    p.close();
  }

  @Test
  void aCutLastLineIsLeftOutAndACorruptLineRefused() throws IOException {
    Persistence p = new Persistence(dir);
    assertNull(p.load());
    p.save(List.of(), List.of(), List.of());
    String line = "F " + Persistence.hex(flow(10, 1, 2));
    p.append(line + "\n" + line.substring(0, 20));
    assertEquals(List.of(1002), outs(p.load()));
    p.append("\nQ nonsense\n");
    IOException e = assertThrows(IOException.class, p::load);
    assertTrue(e.getMessage().contains("state.journal line 2"), e.getMessage());
    p.close();
  }
}
