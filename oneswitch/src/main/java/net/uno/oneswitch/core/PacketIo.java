package net.uno.oneswitch.core;

import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import net.uno.oneswitch.model.PhysRule;
import net.uno.oneswitch.model.VirtualRule;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.Translator;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPacketOut;
import org.projectfloodlight.openflow.types.U64;

/**
 * PACKET_OUT from the controllers onto the physical switch it must run on, and PACKET_IN from the
 * switches back to the controllers as the virtual switch's (docs/translation.md, "PACKET_OUT" and
 * "PACKET_IN"). Core thread only.
 */
public final class PacketIo {
  private final VirtualSwitch vs;
  private final Planner planner;
  private final PhysicalSync sync;
  private final Map<String, SouthSwitch> south;
  private final Controllers controllers;
  private final Metrics metrics;
  private final ScheduledExecutorService exec;

  PacketIo(
      VirtualSwitch vs,
      Planner planner,
      PhysicalSync sync,
      Map<String, SouthSwitch> south,
      Controllers controllers,
      Metrics metrics,
      ScheduledExecutorService exec) {
    this.vs = vs;
    this.planner = planner;
    this.sync = sync;
    this.south = south;
    this.controllers = controllers;
    this.metrics = metrics;
    this.exec = exec;
  }

  /**
   * Sends a controller's PACKET_OUT on its physical switch; any tag it needs is installed, and
   * barriered, before the packet is sent. Throws the OpenFlow error to answer with.
   */
  public void packetOut(OFPacketOut po) throws OfError {
    Set<Long> used = new HashSet<>();
    Translator.PhysPacketOut out;
    try {
      out = planner.translator(used).packetOut(po);
    } catch (OfError e) {
      planner.releaseTags(used);
      metrics.translationErrors.incrementAndGet();
      throw e;
    }
    // Tags used only by this packet: make sure the egress dispatch rules exist first.
    Set<PhysRule.Key> dirty = new LinkedHashSet<>();
    planner.refreshDispatch(dirty);
    CompletableFuture<Void> ready =
        used.isEmpty()
            ? CompletableFuture.completedFuture(null)
            : sync.apply(dirty, Set.of(), true, null);
    ready.whenCompleteAsync(
        (x, e) -> {
          SouthSwitch s = south.get(out.sw());
          if (s != null) {
            s.send(out.msg(), s.nextXid());
            s.flush();
            metrics.packetOuts.incrementAndGet();
          }
          if (!used.isEmpty()) {
            // Keep the delivery rules while the packet may still be crossing the PCIe link.
            exec.schedule(
                () -> {
                  planner.releaseTags(used);
                  sync.dispatchChanged();
                },
                1,
                TimeUnit.SECONDS);
          }
        },
        exec);
  }

  /** A switch's PACKET_IN, to the controllers as the virtual rule's (dropped if no rule's). */
  void packetIn(SouthSwitch sw, OFPacketIn pin) {
    PhysicalState.Installed i = planner.physical().byCookie(pin.getCookie().getValue());
    if (i == null || i.owner() == null) {
      return;
    }
    VirtualRule r = vs.rule(i.owner());
    if (r == null) {
      return;
    }
    planner
        .lookup()
        .packetIn(sw.id(), pin, U64.of(r.cookie()))
        .ifPresent(
            m -> {
              metrics.packetIns.incrementAndGet();
              controllers.broadcast(m);
            });
  }
}
