package net.uno.oneswitch.north;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiFunction;
import java.util.function.Function;
import net.uno.oneswitch.core.OneSwitchCore;
import net.uno.oneswitch.core.TableCounts;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualGroup;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFAggregateStatsRequest;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFBucketCounter;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowStatsEntry;
import org.projectfloodlight.openflow.protocol.OFFlowStatsRequest;
import org.projectfloodlight.openflow.protocol.OFGroupDescStatsEntry;
import org.projectfloodlight.openflow.protocol.OFGroupStatsEntry;
import org.projectfloodlight.openflow.protocol.OFGroupStatsReply;
import org.projectfloodlight.openflow.protocol.OFGroupStatsRequest;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPortDesc;
import org.projectfloodlight.openflow.protocol.OFPortStatsEntry;
import org.projectfloodlight.openflow.protocol.OFPortStatsReply;
import org.projectfloodlight.openflow.protocol.OFPortStatsRequest;
import org.projectfloodlight.openflow.protocol.OFStatsReplyFlags;
import org.projectfloodlight.openflow.protocol.OFStatsRequest;
import org.projectfloodlight.openflow.protocol.OFTableFeaturesStatsRequest;
import org.projectfloodlight.openflow.protocol.OFTableStatsEntry;
import org.projectfloodlight.openflow.protocol.OFTableStatsReply;
import org.projectfloodlight.openflow.types.OFGroup;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U64;

/** Builds MULTIPART replies of the virtual switch. Methods run on the core thread. */
final class StatsReplies {
  private static final OFFactory F = OneSwitchCore.F;
  private static final int CHUNK = 100;
  private final OneSwitchCore core;

  StatsReplies(OneSwitchCore core) {
    this.core = core;
  }

  /** The replies (one or more parts) to a multipart request, or an OfError. */
  CompletableFuture<List<OFMessage>> reply(OFStatsRequest<?> req) throws OfError {
    long xid = req.getXid();
    TableId t = null;
    if (req instanceof OFFlowStatsRequest f) {
      t = f.getTableId();
    } else if (req instanceof OFAggregateStatsRequest a) {
      t = a.getTableId();
    }
    if (t != null && !t.equals(TableId.ALL) && t.getValue() >= core.virtualTables()) {
      throw new OfError(OFBadRequestCode.BAD_TABLE_ID, "table " + t.getValue());
    }
    switch (req.getStatsType()) {
      case DESC:
        return done(
            List.of(
                F.buildDescStatsReply()
                    .setXid(xid)
                    .setMfrDesc("UNO project")
                    .setHwDesc("OneSwitch virtual switch")
                    .setSwDesc("oneswitch 0.1.0")
                    .setSerialNum("none")
                    .setDpDesc("OneSwitch over " + String.join(",", core.topology().switches()))
                    .build()));
      case PORT_DESC:
        {
          List<OFPortDesc> ds = new ArrayList<>();
          core.vswitch().ports().all().forEach(v -> ds.add(core.controllers().portDesc(v)));
          return done(
              parts(
                  ds,
                  p ->
                      F.buildPortDescStatsReply()
                          .setXid(xid)
                          .setEntries(p)
                          .setFlags(Set.of())
                          .build()));
        }
      case FLOW:
        return flow((OFFlowStatsRequest) req);
      case AGGREGATE:
        return aggregate((OFAggregateStatsRequest) req);
      case TABLE:
        return table(xid);
      case PORT:
        return port((OFPortStatsRequest) req);
      case GROUP_DESC:
        {
          List<OFGroupDescStatsEntry> es = new ArrayList<>();
          for (VirtualGroup g : core.vswitch().groups().values()) {
            es.add(
                F.buildGroupDescStatsEntry()
                    .setGroup(OFGroup.of(g.groupId()))
                    .setGroupType(g.type())
                    .setBuckets(g.buckets())
                    .build());
          }
          return done(
              parts(es, p -> F.buildGroupDescStatsReply().setXid(xid).setEntries(p).build()));
        }
      case GROUP:
        return group((OFGroupStatsRequest) req);
      case TABLE_FEATURES:
        if (!((OFTableFeaturesStatsRequest) req).getEntries().isEmpty()) {
          throw new OfError(OFBadRequestCode.EPERM, "table features are read-only");
        }
        return done(more(TableFeatures.reply(xid, core.virtualTables())));
      default:
        throw new OfError(OFBadRequestCode.BAD_STAT, "multipart " + req.getStatsType());
    }
  }

  private static CompletableFuture<List<OFMessage>> done(List<OFMessage> l) {
    return CompletableFuture.completedFuture(l);
  }

  /**
   * A reply of entries {@code es} in parts of {@code CHUNK} ({@code reply} builds one part of its
   * entries), REPLY_MORE on every part but the last.
   */
  private static <E> List<OFMessage> parts(List<E> es, Function<List<E>, OFMessage> reply) {
    List<OFMessage> out = new ArrayList<>();
    for (List<E> part : chunks(es)) {
      out.add(reply.apply(part));
    }
    return more(out);
  }

  private static <T> List<List<T>> chunks(List<T> l) {
    List<List<T>> out = new ArrayList<>();
    for (int i = 0; i < l.size(); i += CHUNK) {
      out.add(l.subList(i, Math.min(l.size(), i + CHUNK)));
    }
    if (out.isEmpty()) {
      out.add(List.of());
    }
    return out;
  }

  /** Sets REPLY_MORE on every part but the last. */
  private static List<OFMessage> more(List<OFMessage> parts) {
    List<OFMessage> out = new ArrayList<>();
    for (int i = 0; i < parts.size(); i++) {
      OFMessage m = parts.get(i);
      if (i < parts.size() - 1) {
        var b = m.createBuilder();
        if (b instanceof org.projectfloodlight.openflow.protocol.OFStatsReply.Builder sb) {
          sb.setFlags(Set.of(OFStatsReplyFlags.REPLY_MORE));
          m = sb.build();
        }
      }
      out.add(m);
    }
    return out;
  }

  /**
   * The reply to a FLOW or AGGREGATE request: {@code reply} builds it on the core thread, once the
   * physical counters are read, of the rules the FLOW request {@code req} selects and the counters.
   */
  private CompletableFuture<List<OFMessage>> overSelected(
      OFFlowStatsRequest req,
      BiFunction<List<VirtualRule>, Map<Long, long[]>, List<OFMessage>> reply) {
    List<VirtualRule> sel =
        core.counters()
            .selectForStats(
                req.getTableId(),
                req.getOutPort(),
                req.getOutGroup(),
                req.getCookie(),
                req.getCookieMask(),
                req.getMatch());
    return core.counters()
        .physicalCounters()
        .thenApplyAsync(counters -> reply.apply(sel, counters), core.exec());
  }

  /** The FLOW request that selects the rules {@code a} does (the same fields). */
  private static OFFlowStatsRequest sameSelection(OFAggregateStatsRequest a) {
    return F.buildFlowStatsRequest()
        .setTableId(a.getTableId())
        .setOutPort(a.getOutPort())
        .setOutGroup(a.getOutGroup())
        .setCookie(a.getCookie())
        .setCookieMask(a.getCookieMask())
        .setMatch(a.getMatch())
        .build();
  }

  private CompletableFuture<List<OFMessage>> flow(OFFlowStatsRequest req) {
    return overSelected(
        req,
        (sel, counters) -> {
          long now = core.counters().now();
          List<OFFlowStatsEntry> es = new ArrayList<>();
          for (VirtualRule r : sel) {
            if (!core.vswitch().rules().containsKey(r.key())) {
              continue;
            }
            long[] c = core.counters().countersOf(r, counters);
            long d = Math.max(0, now - r.installedMillis());
            es.add(
                F.buildFlowStatsEntry()
                    .setTableId(TableId.of(r.table()))
                    .setDurationSec(d / 1000)
                    .setDurationNsec((d % 1000) * 1_000_000)
                    .setPriority(r.priority())
                    .setIdleTimeout(r.idleTimeout())
                    .setHardTimeout(r.hardTimeout())
                    .setFlags(r.flags())
                    .setCookie(U64.of(r.cookie()))
                    .setPacketCount(U64.of(c[0]))
                    .setByteCount(U64.of(c[1]))
                    .setMatch(r.match())
                    .setInstructions(r.instructions())
                    .build());
          }
          return parts(es, p -> F.buildFlowStatsReply().setXid(req.getXid()).setEntries(p).build());
        });
  }

  private CompletableFuture<List<OFMessage>> aggregate(OFAggregateStatsRequest req) {
    return overSelected(
        sameSelection(req),
        (sel, counters) -> {
          long p = 0;
          long b = 0;
          for (VirtualRule r : sel) {
            long[] c = core.counters().countersOf(r, counters);
            p += c[0];
            b += c[1];
          }
          return List.<OFMessage>of(
              F.buildAggregateStatsReply()
                  .setXid(req.getXid())
                  .setPacketCount(U64.of(p))
                  .setByteCount(U64.of(b))
                  .setFlowCount(sel.size())
                  .build());
        });
  }

  private CompletableFuture<List<OFMessage>> table(long xid) {
    Map<Integer, long[]> phys = new HashMap<>();
    List<CompletableFuture<Void>> fs = new ArrayList<>();
    for (SouthSwitch s : core.south().values()) {
      if (!s.isReady()) {
        continue;
      }
      fs.add(
          s.<OFTableStatsReply>stats(F.buildTableStatsRequest().setXid(s.nextXid()).build())
              .thenAccept(
                  rs -> {
                    synchronized (phys) {
                      for (OFTableStatsReply r : rs) {
                        for (OFTableStatsEntry e : r.getEntries()) {
                          long[] a =
                              phys.computeIfAbsent(
                                  (int) e.getTableId().getValue(), k -> new long[2]);
                          a[0] += e.getLookupCount().getValue();
                          a[1] += e.getMatchedCount().getValue();
                        }
                      }
                    }
                  })
              .exceptionally(e -> null));
    }
    // A handed-off packet is looked up in its table twice (the handoff rule, then the table's
    // switch): the handoff rules' packets (the live ones' and the deleted ones') are taken out
    // once.
    Set<Integer> handoffTables = core.counters().handoffTables();
    CompletableFuture<Map<Long, long[]>> handoffCounters =
        handoffTables.isEmpty()
            ? CompletableFuture.completedFuture(Map.of())
            : core.counters().physicalCounters(handoffTables);
    fs.add(handoffCounters.thenAccept(c -> {}));
    return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]))
        .thenApplyAsync(
            x -> {
              Map<Integer, Long> twice = core.counters().handoffPackets(handoffCounters.join());
              int[] active = new int[core.virtualTables()];
              core.vswitch().rules().values().forEach(r -> active[r.table()]++);
              List<OFTableStatsEntry> es = new ArrayList<>();
              for (int t = 0; t < core.virtualTables(); t++) {
                long[] a = TableCounts.of(t, phys, twice);
                es.add(
                    F.buildTableStatsEntry()
                        .setTableId(TableId.of(t))
                        .setActiveCount(active[t])
                        .setLookupCount(U64.of(a[0]))
                        .setMatchedCount(U64.of(a[1]))
                        .build());
              }
              return parts(es, p -> F.buildTableStatsReply().setXid(xid).setEntries(p).build());
            },
            core.exec());
  }

  /** Counters of {@code v}: its physical port's, summed over the instances; null if none. */
  private static OFPortStatsEntry sum(VPort v, Map<String, Map<Integer, OFPortStatsEntry>> phys) {
    OFPortStatsEntry first = null;
    long[] c = new long[12];
    for (VPort.Loc l : v.instances()) {
      OFPortStatsEntry e = phys.getOrDefault(l.sw(), Map.of()).get(l.port());
      if (e == null) {
        continue;
      }
      if (first == null) {
        first = e;
      }
      U64[] f = {
        e.getRxPackets(), e.getTxPackets(), e.getRxBytes(), e.getTxBytes(),
        e.getRxDropped(), e.getTxDropped(), e.getRxErrors(), e.getTxErrors(),
        e.getRxFrameErr(), e.getRxOverErr(), e.getRxCrcErr(), e.getCollisions()
      };
      for (int i = 0; i < f.length; i++) {
        c[i] += f[i].getValue();
      }
    }
    if (first == null || v.k() == 1) {
      return first;
    }
    return first
        .createBuilder()
        .setRxPackets(U64.of(c[0]))
        .setTxPackets(U64.of(c[1]))
        .setRxBytes(U64.of(c[2]))
        .setTxBytes(U64.of(c[3]))
        .setRxDropped(U64.of(c[4]))
        .setTxDropped(U64.of(c[5]))
        .setRxErrors(U64.of(c[6]))
        .setTxErrors(U64.of(c[7]))
        .setRxFrameErr(U64.of(c[8]))
        .setRxOverErr(U64.of(c[9]))
        .setRxCrcErr(U64.of(c[10]))
        .setCollisions(U64.of(c[11]))
        .build();
  }

  private CompletableFuture<List<OFMessage>> port(OFPortStatsRequest req) {
    OFPort want = req.getPortNo();
    List<VPort> sel = new ArrayList<>();
    for (VPort v : core.vswitch().ports().all()) {
      if (want.equals(OFPort.ANY) || want.getPortNumber() == v.vport()) {
        sel.add(v);
      }
    }
    Map<String, Map<Integer, OFPortStatsEntry>> phys = new HashMap<>();
    List<CompletableFuture<Void>> fs = new ArrayList<>();
    for (SouthSwitch s : core.south().values()) {
      if (!s.isReady() || sel.stream().noneMatch(v -> v.on(s.id()))) {
        continue;
      }
      fs.add(
          s.<OFPortStatsReply>stats(
                  F.buildPortStatsRequest().setXid(s.nextXid()).setPortNo(OFPort.ANY).build())
              .thenAccept(
                  rs -> {
                    synchronized (phys) {
                      Map<Integer, OFPortStatsEntry> m = new HashMap<>();
                      rs.forEach(
                          r ->
                              r.getEntries().forEach(e -> m.put(e.getPortNo().getPortNumber(), e)));
                      phys.put(s.id(), m);
                    }
                  })
              .exceptionally(e -> null));
    }
    return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]))
        .thenApplyAsync(
            x -> {
              List<OFPortStatsEntry> es = new ArrayList<>();
              for (VPort v : sel) {
                OFPortStatsEntry p = sum(v, phys); // a scaled-out vport: over its instances
                var b = F.buildPortStatsEntry().setPortNo(OFPort.of(v.vport()));
                if (p == null) {
                  b.setRxPackets(U64.ZERO)
                      .setTxPackets(U64.ZERO)
                      .setRxBytes(U64.ZERO)
                      .setTxBytes(U64.ZERO)
                      .setRxDropped(U64.ZERO)
                      .setTxDropped(U64.ZERO)
                      .setRxErrors(U64.ZERO)
                      .setTxErrors(U64.ZERO)
                      .setRxFrameErr(U64.ZERO)
                      .setRxOverErr(U64.ZERO)
                      .setRxCrcErr(U64.ZERO)
                      .setCollisions(U64.ZERO);
                } else {
                  b.setRxPackets(p.getRxPackets())
                      .setTxPackets(p.getTxPackets())
                      .setRxBytes(p.getRxBytes())
                      .setTxBytes(p.getTxBytes())
                      .setRxDropped(p.getRxDropped())
                      .setTxDropped(p.getTxDropped())
                      .setRxErrors(p.getRxErrors())
                      .setTxErrors(p.getTxErrors())
                      .setRxFrameErr(p.getRxFrameErr())
                      .setRxOverErr(p.getRxOverErr())
                      .setRxCrcErr(p.getRxCrcErr())
                      .setCollisions(p.getCollisions())
                      .setDurationSec(p.getDurationSec())
                      .setDurationNsec(p.getDurationNsec());
                }
                es.add(b.build());
              }
              return parts(
                  es, p -> F.buildPortStatsReply().setXid(req.getXid()).setEntries(p).build());
            },
            core.exec());
  }

  private CompletableFuture<List<OFMessage>> group(OFGroupStatsRequest req) {
    OFGroup want = req.getGroup();
    Map<Integer, long[]> sums = new HashMap<>();
    Map<Integer, List<long[]>> buckets = new HashMap<>();
    List<CompletableFuture<Void>> fs = new ArrayList<>();
    for (SouthSwitch s : core.south().values()) {
      if (!s.isReady()) {
        continue;
      }
      fs.add(
          s.<OFGroupStatsReply>stats(
                  F.buildGroupStatsRequest().setXid(s.nextXid()).setGroup(OFGroup.ALL).build())
              .thenAccept(
                  rs -> {
                    synchronized (sums) {
                      for (OFGroupStatsReply r : rs) {
                        for (OFGroupStatsEntry e : r.getEntries()) {
                          // A label variant's counters are its controller group's.
                          int g = core.planner().groupOfPhysical(e.getGroup().getGroupNumber());
                          long[] a = sums.computeIfAbsent(g, k -> new long[2]);
                          a[0] += e.getPacketCount().getValue();
                          a[1] += e.getByteCount().getValue();
                          List<long[]> bl = buckets.computeIfAbsent(g, k -> new ArrayList<>());
                          List<OFBucketCounter> bc = e.getBucketStats();
                          for (int i = 0; i < bc.size(); i++) {
                            if (bl.size() <= i) {
                              bl.add(new long[2]);
                            }
                            bl.get(i)[0] += bc.get(i).getPacketCount().getValue();
                            bl.get(i)[1] += bc.get(i).getByteCount().getValue();
                          }
                        }
                      }
                    }
                  })
              .exceptionally(e -> null));
    }
    return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]))
        .thenApplyAsync(
            x -> {
              List<OFGroupStatsEntry> es = new ArrayList<>();
              for (VirtualGroup g : core.vswitch().groups().values()) {
                if (!want.equals(OFGroup.ALL) && want.getGroupNumber() != g.groupId()) {
                  continue;
                }
                long[] a = sums.getOrDefault(g.groupId(), new long[2]);
                List<OFBucketCounter> bc = new ArrayList<>();
                List<long[]> bl = buckets.getOrDefault(g.groupId(), List.of());
                for (int i = 0; i < g.buckets().size(); i++) {
                  long[] c = i < bl.size() ? bl.get(i) : new long[2];
                  bc.add(F.bucketCounter(U64.of(c[0]), U64.of(c[1])));
                }
                int refs = core.counters().groupRefs(g.groupId());
                es.add(
                    F.buildGroupStatsEntry()
                        .setGroup(OFGroup.of(g.groupId()))
                        .setRefCount(refs)
                        .setPacketCount(U64.of(a[0]))
                        .setByteCount(U64.of(a[1]))
                        .setDurationSec(core.counters().groupAgeMillis(g.groupId()) / 1000)
                        .setDurationNsec(
                            (core.counters().groupAgeMillis(g.groupId()) % 1000) * 1_000_000)
                        .setBucketStats(bc)
                        .build());
              }
              return parts(
                  es, p -> F.buildGroupStatsReply().setXid(req.getXid()).setEntries(p).build());
            },
            core.exec());
  }
}
