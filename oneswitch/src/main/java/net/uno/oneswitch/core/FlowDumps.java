package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongPredicate;
import net.uno.oneswitch.south.SouthSwitch;
import org.projectfloodlight.openflow.protocol.OFFlowStatsEntry;
import org.projectfloodlight.openflow.protocol.OFFlowStatsReply;
import org.projectfloodlight.openflow.protocol.OFFlowStatsRequest;
import org.projectfloodlight.openflow.protocol.OFGroupDescStatsEntry;
import org.projectfloodlight.openflow.protocol.OFGroupDescStatsReply;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/**
 * What the physical switches hold, from their flow and group dumps: the flow counters by cookie
 * (virtual statistics and idle timeouts), the flows that are not OneSwitch's (reconciliation).
 */
final class FlowDumps {
  private FlowDumps() {}

  /** A request for every flow of {@code sw}, or of physical table {@code table} (-1: all). */
  static OFFlowStatsRequest request(SouthSwitch sw, int table) {
    return OneSwitchCore.F.buildFlowStatsRequest()
        .setXid(sw.nextXid())
        .setTableId(table < 0 ? TableId.ALL : TableId.of(table))
        .setOutPort(OFPort.ANY)
        .setOutGroup(OFGroup.ANY)
        .setMatch(OneSwitchCore.F.buildMatch().build())
        .setCookie(U64.ZERO)
        .setCookieMask(U64.ZERO)
        .build();
  }

  /**
   * {packets, bytes} by cookie of every flow of the ready switches of {@code switches}, in physical
   * {@code tables} (null: all). A switch that fails to answer adds nothing.
   */
  static CompletableFuture<Map<Long, long[]>> counters(
      Collection<SouthSwitch> switches, Set<Integer> tables) {
    Map<Long, long[]> out = new HashMap<>();
    List<CompletableFuture<Void>> fs = new ArrayList<>();
    for (SouthSwitch s : switches) {
      if (!s.isReady()) {
        continue;
      }
      List<OFFlowStatsRequest> reqs = new ArrayList<>();
      if (tables == null) {
        reqs.add(request(s, -1));
      } else {
        for (int t : tables) {
          reqs.add(request(s, t));
        }
      }
      for (OFFlowStatsRequest req : reqs) {
        fs.add(
            s.<OFFlowStatsReply>stats(req)
                .thenAccept(
                    rs -> {
                      synchronized (out) {
                        for (OFFlowStatsReply r : rs) {
                          for (OFFlowStatsEntry e : r.getEntries()) {
                            out.put(
                                e.getCookie().getValue(),
                                new long[] {
                                  e.getPacketCount().getValue(), e.getByteCount().getValue()
                                });
                          }
                        }
                      }
                    })
                .exceptionally(e -> null));
      }
    }
    return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0])).thenApply(x -> out);
  }

  /**
   * The cookies of the dumped flows that are not OneSwitch's: not in {@code ours} and not {@code
   * inFlight} (issued since the dump began: a plan is installing or deleting it right now), of
   * those {@code deletable} accepts (a shared switch: OneSwitch's marked cookies only, {@link
   * PhysicalState#owned}; else every cookie).
   */
  static Set<Long> stale(
      List<OFFlowStatsReply> replies,
      Set<Long> ours,
      LongPredicate inFlight,
      LongPredicate deletable) {
    Set<Long> out = new HashSet<>();
    for (OFFlowStatsReply r : replies) {
      for (OFFlowStatsEntry e : r.getEntries()) {
        long c = e.getCookie().getValue();
        if (!ours.contains(c) && !inFlight.test(c) && deletable.test(c)) {
          out.add(c);
        }
      }
    }
    return out;
  }

  /** How many dumped flows have a cookie {@code which} accepts. */
  static int count(List<OFFlowStatsReply> replies, LongPredicate which) {
    int n = 0;
    for (OFFlowStatsReply r : replies) {
      for (OFFlowStatsEntry e : r.getEntries()) {
        if (which.test(e.getCookie().getValue())) {
          n++;
        }
      }
    }
    return n;
  }

  /** The groups of a group-description dump, by id. */
  static Map<Integer, GroupSpec> groups(List<OFGroupDescStatsReply> replies) {
    Map<Integer, GroupSpec> out = new HashMap<>();
    for (OFGroupDescStatsReply r : replies) {
      for (OFGroupDescStatsEntry e : r.getEntries()) {
        out.put(e.getGroup().getGroupNumber(), new GroupSpec(e.getGroupType(), e.getBuckets()));
      }
    }
    return out;
  }
}
