package net.uno.oneswitch.translate;

import java.util.*;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.*;
import org.projectfloodlight.openflow.protocol.instruction.OFInstruction;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.*;

/**
 * Benchmark (not a test): the action-set order check over n rules that all write an output, the
 * core's incremental index vs a scan of every rule, side by side. Run: java -cp
 * oneswitch/target/oneswitch-0.1.0-all.jar:oneswitch/target/test-classes
 * net.uno.oneswitch.translate.ActionSetOrderBench 3024
 */
public final class ActionSetOrderBench {
  private ActionSetOrderBench() {}

  public static void main(String[] a) throws Exception {
    OFFactory F = OFFactories.getFactory(OFVersion.OF_13);
    int n = Integer.parseInt(a[0]);
    List<VirtualRule> all = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      var m =
          F.buildMatch()
              .setExact(MatchField.IN_PORT, OFPort.of(1 + i % 4))
              .setExact(MatchField.ETH_TYPE, EthType.IPv4)
              .setExact(MatchField.IPV4_DST, IPv4Address.of(i))
              .build();
      List<OFInstruction> ins =
          List.of(
              F.instructions()
                  .writeActions(List.of(F.actions().output(OFPort.of(1 + i % 4), 0xffff))));
      all.add(new VirtualRule(i % 3, i % 60000, m, ins, 0, 0, 0, Set.of(), 0));
    }
    List<Double> idxMs = new ArrayList<>(), scanMs = new ArrayList<>();
    for (int round = 0; round < 7; round++) {
      long t0 = System.nanoTime();
      ActionSetOrder idx = new ActionSetOrder();
      for (VirtualRule r : all) {
        idx.check(r);
        idx.add(r);
      }
      idxMs.add((System.nanoTime() - t0) / 1e6);
      t0 = System.nanoTime();
      List<VirtualRule> seen = new ArrayList<>();
      for (VirtualRule r : all) {
        ActionSetOrder.check(r, seen);
        seen.add(r);
      }
      scanMs.add((System.nanoTime() - t0) / 1e6);
    }
    Collections.sort(idxMs);
    Collections.sort(scanMs);
    double mi = idxMs.get(3), ms = scanMs.get(3);
    System.out.printf(
        "n=%d index median %.2f ms (%.2f us/check), scan median %.1f ms (%.1f us/check), ratio %.0fx%n",
        n, mi, mi * 1000 / n, ms, ms * 1000 / n, ms / mi);
  }
}
