package net.uno.oneswitch.core;

import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.south.SouthListener;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.OfError;
import org.projectfloodlight.openflow.protocol.OFErrorMsg;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowRemoved;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.projectfloodlight.openflow.protocol.OFPortStatus;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the physical switches report, posted from their connections' threads onto the core thread
 * and handed to the part that handles it: (re)connections to the {@link Reconciler}, PACKET_IN to
 * {@link PacketIo}, FLOW_REMOVED to {@link FlowRemovals}, port changes to the controllers and
 * {@link PortChanges}, and a refusal of a controller's message (answered and rolled back).
 */
final class SouthEvents implements SouthListener {
  private static final Logger LOG = LoggerFactory.getLogger(SouthEvents.class);

  private final OFFactory f;
  private final VirtualSwitch vs;
  private final Planner planner;
  private final PhysicalSync sync;
  private final FlowRemovals removals;
  private final Refusals refusals;
  private final Reconciler reconciler;
  private final PacketIo packets;
  private final PortChanges portChanges;
  private final Controllers controllers;
  private final Metrics metrics;
  private final ScheduledExecutorService exec;

  SouthEvents(
      OFFactory f,
      VirtualSwitch vs,
      Planner planner,
      PhysicalSync sync,
      FlowRemovals removals,
      Refusals refusals,
      Reconciler reconciler,
      PacketIo packets,
      PortChanges portChanges,
      Controllers controllers,
      Metrics metrics,
      ScheduledExecutorService exec) {
    this.f = f;
    this.vs = vs;
    this.planner = planner;
    this.sync = sync;
    this.removals = removals;
    this.refusals = refusals;
    this.reconciler = reconciler;
    this.packets = packets;
    this.portChanges = portChanges;
    this.controllers = controllers;
    this.metrics = metrics;
    this.exec = exec;
  }

  /** Runs {@code r} on the core thread, logging (never losing) an unexpected exception. */
  private void onCore(Runnable r) {
    exec.execute(
        () -> {
          try {
            r.run();
          } catch (RuntimeException e) {
            LOG.error("core task failed: {}", e.toString(), e);
          }
        });
  }

  /**
   * PORT_STATUS(MODIFY) of every vport served on {@code sw}: its state follows the switch (link
   * down while the switch is down, see {@link Controllers#portDesc}).
   */
  private void portsOf(SouthSwitch sw) {
    vs.ports().all().stream()
        .filter(v -> v.on(sw.id()))
        .forEach(v -> controllers.portStatus(v, OFPortReason.MODIFY));
  }

  @Override
  public void connected(SouthSwitch sw) {
    onCore(() -> reconciler.reconcile(sw));
    onCore(() -> portsOf(sw));
  }

  /**
   * A switch went down (its connection closed, or silent past the echo timeout): what it held is
   * unknown until it returns (then reconciled), nothing is sent to it meanwhile (port changes skip
   * it, a remap's phases do not wait for it), and the controllers see its vports go link down.
   */
  @Override
  public void disconnected(SouthSwitch sw) {
    onCore(
        () -> {
          reconciler.forget(sw);
          refusals.forget(sw.id());
          portsOf(sw);
        });
  }

  @Override
  public void packetIn(SouthSwitch sw, OFPacketIn pin) {
    onCore(() -> packets.packetIn(sw, pin));
  }

  @Override
  public void flowRemoved(SouthSwitch sw, OFFlowRemoved fr) {
    onCore(
        () -> {
          long c = fr.getCookie().getValue();
          long p = fr.getPacketCount().getValue();
          long b = fr.getByteCount().getValue();
          if (removals.removed(c, p, b, k -> vs.rule(k) != null)) {
            return;
          }
          PhysicalState.Installed i = planner.physical().byCookie(c);
          if (i != null) {
            LOG.warn("switch {}: flow {} removed behind our back, reinstalling", sw.id(), c);
            sync.apply(Set.of(i.rule().key()), Set.of(i.rule().key()));
          }
        });
  }

  @Override
  public void portStatus(SouthSwitch sw, OFPortStatus ps) {
    int port = ps.getDesc().getPortNo().getPortNumber();
    onCore(
        () -> {
          vs.ports()
              .byPhysical(sw.id(), port)
              .ifPresent(v -> controllers.portStatus(v, OFPortReason.MODIFY));
          if (ps.getReason() == OFPortReason.DELETE) {
            portChanges.endDrainOfDeleted(new VPort.Loc(sw.id(), port));
          }
        });
  }

  @Override
  public void error(SouthSwitch sw, OFErrorMsg err) {
    onCore(() -> physicalError(sw.id(), err));
  }

  /**
   * A physical switch refused a message. If it belongs to a controller's flow-mod/group-mod, fail
   * closed: that controller gets an OFPT_ERROR for ITS message (the switch's type/code) and the
   * virtual change is rolled back on every switch, so virtual and physical state agree again.
   */
  private void physicalError(String sw, OFErrorMsg err) {
    metrics.physicalErrors.incrementAndGet();
    Refusals.Undo u = refusals.refused(sw, err.getXid());
    if (u == null) {
      LOG.warn("switch {}: error {}", sw, err);
      return;
    }
    metrics.physicalRefusals.incrementAndGet();
    Enum<?> code = OfError.codeOf(err);
    Origin o = u.origin();
    LOG.warn(
        "switch {}: refused part of controller {}'s message xid {} ({}): rolling it back",
        sw,
        o.session().name(),
        o.xid(),
        code);
    o.session().send(OfError.build(f, code, o.xid(), o.head()));
    u.rollBack();
  }
}
