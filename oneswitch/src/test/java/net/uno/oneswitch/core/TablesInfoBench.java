package net.uno.oneswitch.core;

import static net.uno.oneswitch.translate.Fixtures.F;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.translate.Carrier;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.types.EthType;
import org.projectfloodlight.openflow.types.IPv4Address;
import org.projectfloodlight.openflow.types.IpProtocol;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.TransportPort;

/**
 * What {@code GET /v1/tables} costs ({@link TableMoves#tables()} on the core's thread, the REST
 * layer left out): N filtering rules in table 0 (the bench's kind), a forwarding table 1, table 0
 * on snic0; the call timed {@code REPEAT} times with nothing changed, then once after each of a few
 * flow-mods. Not a test: run by hand (bench/RESULTS.md "offload").
 *
 * <p>Usage: {@code java -cp ... net.uno.oneswitch.core.TablesInfoBench [N]}.
 */
public final class TablesInfoBench {
  private static final int REPEAT = 5;

  private TablesInfoBench() {}

  public static void main(String[] args) throws Exception {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 65536;
    ScheduledExecutorService exec = Executors.newSingleThreadScheduledExecutor();
    try {
      OneSwitchCore core = FixtureCore.start(exec, Carrier.Mode.AUTO, 1, 600);
      on(
          exec,
          () -> {
            for (int i = 0; i < n; i++) {
              core.flowMods().flowMod(rule(i));
            }
            core.flowMods()
                .flowMod(
                    F.buildFlowAdd()
                        .setTableId(TableId.of(0))
                        .setPriority(0)
                        .setMatch(F.buildMatch().build())
                        .setInstructions(List.of(F.instructions().gotoTable(TableId.of(1))))
                        .build());
            core.flowMods()
                .flowMod(
                    F.buildFlowAdd()
                        .setTableId(TableId.of(1))
                        .setPriority(10)
                        .setMatch(F.buildMatch().setExact(MatchField.IN_PORT, OFPort.of(2)).build())
                        .setInstructions(
                            List.of(
                                F.instructions()
                                    .applyActions(
                                        List.of(F.actions().output(OFPort.of(1), 0xffff)))))
                        .build());
            return null;
          });
      on(exec, () -> core.tableMoves().move(0, "snic0", 0)).get(600, TimeUnit.SECONDS);
      List<Double> unchanged = new ArrayList<>();
      for (int i = 0; i < REPEAT; i++) {
        unchanged.add(timed(exec, core));
      }
      List<Double> afterFlowMod = new ArrayList<>();
      for (int i = 0; i < REPEAT; i++) {
        int k = n + i;
        on(
            exec,
            () -> {
              core.flowMods().flowMod(rule(k));
              return null;
            });
        afterFlowMod.add(timed(exec, core));
      }
      System.out.printf(
          "{\"rules\": %d, \"get_ms_unchanged\": %s, \"get_ms_after_flow_mod\": %s}%n",
          n, unchanged, afterFlowMod);
    } finally {
      exec.shutdownNow();
    }
  }

  private static double timed(ScheduledExecutorService exec, OneSwitchCore core) throws Exception {
    long t0 = System.nanoTime();
    int tables = on(exec, () -> core.tableMoves().tables().size());
    double ms = (System.nanoTime() - t0) / 1e6;
    if (tables != 2) {
      throw new IllegalStateException("expected 2 tables, got " + tables);
    }
    return Math.round(ms * 10) / 10.0;
  }

  /** Filtering rule i: drop UDP to one address and port. */
  private static org.projectfloodlight.openflow.protocol.OFFlowMod rule(int i) {
    return F.buildFlowAdd()
        .setTableId(TableId.of(0))
        .setPriority(100)
        .setMatch(
            F.buildMatch()
                .setExact(MatchField.ETH_TYPE, EthType.IPv4)
                .setExact(MatchField.IP_PROTO, IpProtocol.UDP)
                .setExact(MatchField.IPV4_DST, IPv4Address.of(0x0b000000 + (i >> 10)))
                .setExact(MatchField.UDP_DST, TransportPort.of(1024 + (i & 1023)))
                .build())
        .setInstructions(List.of())
        .build();
  }

  private static <T> T on(ScheduledExecutorService exec, Callable<T> c) throws Exception {
    return exec.submit(c).get(600, TimeUnit.SECONDS);
  }
}
