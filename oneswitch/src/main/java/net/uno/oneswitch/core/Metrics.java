package net.uno.oneswitch.core;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

/** Counters and a flow-mod latency summary, rendered as Prometheus text. */
public final class Metrics {
  public final AtomicLong flowMods = new AtomicLong();
  public final AtomicLong groupMods = new AtomicLong();
  public final AtomicLong translationErrors = new AtomicLong();
  public final AtomicLong physicalErrors = new AtomicLong();
  public final AtomicLong physicalFlowMods = new AtomicLong();
  public final AtomicLong physicalRefusals = new AtomicLong();
  public final AtomicLong remaps = new AtomicLong();
  public final AtomicLong packetIns = new AtomicLong();
  public final AtomicLong packetOuts = new AtomicLong();
  private final double[] lat = new double[4096];
  private int latN;
  private long latCount;
  private double latSum;

  public synchronized void flowModLatency(double seconds) {
    lat[latN++ % lat.length] = seconds;
    latCount++;
    latSum += seconds;
  }

  public synchronized String render(int virtualRules, int physicalRules) {
    StringBuilder b = new StringBuilder();
    gauge(b, "oneswitch_virtual_rules", "Virtual flow entries", virtualRules);
    gauge(b, "oneswitch_physical_rules", "Physical flow entries installed", physicalRules);
    counter(b, "oneswitch_flow_mods_total", "Virtual FLOW_MODs handled", flowMods.get());
    counter(b, "oneswitch_group_mods_total", "Virtual GROUP_MODs handled", groupMods.get());
    counter(
        b,
        "oneswitch_translation_errors_total",
        "Requests refused with an OpenFlow error",
        translationErrors.get());
    counter(
        b,
        "oneswitch_physical_errors_total",
        "OFPT_ERRORs received from physical switches",
        physicalErrors.get());
    counter(
        b,
        "oneswitch_physical_refusals_total",
        "Controller messages refused by a physical switch (answered with an error, rolled back)",
        physicalRefusals.get());
    counter(
        b,
        "oneswitch_physical_flow_mods_total",
        "FLOW_MOD/GROUP_MOD messages sent to physical switches",
        physicalFlowMods.get());
    counter(b, "oneswitch_remaps_total", "Virtual port remaps done", remaps.get());
    counter(b, "oneswitch_packet_ins_total", "PACKET_INs sent to controllers", packetIns.get());
    counter(b, "oneswitch_packet_outs_total", "PACKET_OUTs executed", packetOuts.get());
    b.append("# HELP oneswitch_flow_mod_latency_seconds Virtual FLOW_MOD handling time\n");
    b.append("# TYPE oneswitch_flow_mod_latency_seconds summary\n");
    int n = (int) Math.min(latN, lat.length);
    double[] s = Arrays.copyOf(lat, n);
    Arrays.sort(s);
    for (double q : new double[] {0.5, 0.9, 0.99}) {
      double v = n == 0 ? 0 : s[Math.min(n - 1, (int) Math.floor(q * n))];
      b.append("oneswitch_flow_mod_latency_seconds{quantile=\"")
          .append(q)
          .append("\"} ")
          .append(v)
          .append('\n');
    }
    b.append("oneswitch_flow_mod_latency_seconds_sum ").append(latSum).append('\n');
    b.append("oneswitch_flow_mod_latency_seconds_count ").append(latCount).append('\n');
    return b.toString();
  }

  private static void gauge(StringBuilder b, String n, String h, long v) {
    b.append("# HELP ").append(n).append(' ').append(h).append('\n');
    b.append("# TYPE ").append(n).append(" gauge\n").append(n).append(' ').append(v).append('\n');
  }

  private static void counter(StringBuilder b, String n, String h, long v) {
    b.append("# HELP ").append(n).append(' ').append(h).append('\n');
    b.append("# TYPE ").append(n).append(" counter\n").append(n).append(' ').append(v).append('\n');
  }
}
