package net.uno.oneswitch.core;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import net.uno.oneswitch.model.Topology;
import net.uno.oneswitch.south.SouthListener;
import net.uno.oneswitch.south.SouthSwitch;
import net.uno.oneswitch.translate.Carrier;
import net.uno.oneswitch.translate.VlanPushOrder;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFVersion;

/**
 * The core's parts, wired together; it holds no state and no logic of its own. Every part runs on
 * the single core executor ({@link #exec()}), which owns all state; callers on other threads post
 * to it.
 *
 * <ul>
 *   <li>{@link VirtualSwitch}: the pure virtual-switch model (rules, groups, port map); returns the
 *       change a message makes.
 *   <li>{@link Planner}: virtual change -> physical change (translation, the physical form, the
 *       make-before-break plan). {@link PlanExecutor} sends plans; {@link PhysicalSync} joins the
 *       two.
 *   <li>{@link FlowMods}, {@link GroupMods}: the controllers' FLOW_MOD and GROUP_MOD (with rollback
 *       on a physical refusal); {@link PortChanges}: the port map (map, remap, prepare, instances,
 *       drains); {@link PacketIo}: PACKET_OUT/PACKET_IN; {@link Counters}: statistics; {@link
 *       Timeouts}: the 1 s tick; {@link Reconciler}: a (re)connected switch; {@link StateStore}:
 *       the state on disk; {@link Controllers}: the controller connections; {@link SouthEvents}:
 *       what the switches report.
 * </ul>
 */
public final class OneSwitchCore {
  public static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private final Topology topo;
  private final ScheduledExecutorService exec;
  private final Metrics metrics;
  private final Map<String, SouthSwitch> south = new LinkedHashMap<>();
  private final VirtualSwitch vs;
  private final Planner planner;
  private final PlanExecutor executor;
  private final Controllers controllers;
  private final StateStore state;
  private final Bundles bundles;
  private final FlowMods flowMods;
  private final GroupMods groupMods;
  private final PortChanges portChanges;
  private final TableMoves tableMoves;
  private final PacketIo packets;
  private final Counters counters;
  private final Timeouts timeouts;
  private final SouthEvents southEvents;

  public OneSwitchCore(
      Topology topo,
      int physicalTables,
      ScheduledExecutorService exec,
      LongSupplier clock,
      Metrics metrics,
      Persistence persistence) {
    this(
        topo,
        physicalTables,
        exec,
        clock,
        metrics,
        persistence,
        Carrier.Mode.AUTO,
        VlanPushOrder.WIRE);
  }

  /**
   * {@code carrierMode}: the flow-id carrier (config {@code carrier}); {@code wireVlans}: the most
   * VLAN headers a frame may carry when it comes in from a port, 1 or 2 (config {@code wire_vlans},
   * {@link VlanPushOrder}).
   */
  public OneSwitchCore(
      Topology topo,
      int physicalTables,
      ScheduledExecutorService exec,
      LongSupplier clock,
      Metrics metrics,
      Persistence persistence,
      Carrier.Mode carrierMode,
      int wireVlans) {
    this.topo = topo;
    this.exec = exec;
    this.metrics = metrics;
    int nVirt = physicalTables - 2;
    vs = new VirtualSwitch(nVirt, wireVlans);
    planner = new Planner(topo, nVirt, carrierMode, vs);
    Refusals refusals = new Refusals();
    executor = new PlanExecutor(south, refusals, metrics, exec);
    controllers = new Controllers(F, south);
    state = new StateStore(vs, persistence, F, exec, clock);
    FlowRemovals removals = new FlowRemovals(F, clock, controllers::broadcast);
    IdleTimeouts idle = new IdleTimeouts();
    PhysicalSync sync = new PhysicalSync(vs, planner, executor, removals, state::changed);
    flowMods = new FlowMods(vs, planner, sync, refusals, removals, idle, metrics, exec, clock);
    groupMods = new GroupMods(vs, planner, sync, flowMods, refusals, metrics, clock);
    bundles = new Bundles(flowMods, groupMods, sync, refusals);
    portChanges =
        new PortChanges(topo, vs, planner, sync, executor, controllers, metrics, exec, clock);
    tableMoves =
        new TableMoves(
            topo,
            vs,
            planner,
            sync,
            executor,
            exec,
            persistence == null ? null : persistence.file().resolveSibling("tables.json"));
    packets = new PacketIo(vs, planner, sync, south, controllers, metrics, exec);
    counters = new Counters(vs, planner, removals, south, clock);
    timeouts =
        new Timeouts(vs, flowMods, portChanges, counters, idle, refusals, executor, exec, clock);
    Reconciler reconciler = new Reconciler(F, planner, executor, exec);
    southEvents =
        new SouthEvents(
            F,
            vs,
            planner,
            sync,
            removals,
            refusals,
            reconciler,
            packets,
            portChanges,
            controllers,
            metrics,
            exec);
  }

  public ScheduledExecutorService exec() {
    return exec;
  }

  public Metrics metrics() {
    return metrics;
  }

  public Topology topology() {
    return topo;
  }

  public int virtualTables() {
    return vs.tables();
  }

  public void addSouth(SouthSwitch s) {
    south.put(s.id(), s);
  }

  /** The physical switches by id. */
  public Map<String, SouthSwitch> south() {
    return south;
  }

  /** What the physical switches report goes here (give it to each {@link SouthSwitch}). */
  public SouthListener southListener() {
    return southEvents;
  }

  public VirtualSwitch vswitch() {
    return vs;
  }

  public Planner planner() {
    return planner;
  }

  public Controllers controllers() {
    return controllers;
  }

  public FlowMods flowMods() {
    return flowMods;
  }

  public GroupMods groupMods() {
    return groupMods;
  }

  public PortChanges portChanges() {
    return portChanges;
  }

  /** Where each virtual table runs, and its moves. */
  public TableMoves tableMoves() {
    return tableMoves;
  }

  public PacketIo packets() {
    return packets;
  }

  public Counters counters() {
    return counters;
  }

  public Bundles bundles() {
    return bundles;
  }

  public StateStore state() {
    return state;
  }

  /**
   * Completes when every connected physical switch answered a barrier (errors ignored), on the core
   * thread after the switch's earlier errors were handled (a refusal reaches the controller before
   * the BARRIER_REPLY that covers its message), and every change made by then is on disk (what the
   * reply acknowledges survives OneSwitch's death; written meanwhile by the journal's thread).
   */
  public CompletableFuture<Void> barrierAll() {
    return executor.barrierAll(false, null).thenCompose(x -> state.durable());
  }

  /**
   * Completes (on the core thread) once every change made so far is on disk; call on the core
   * thread.
   */
  public CompletableFuture<Void> durable() {
    return state.durable();
  }

  /** Restores saved state (before any switch connects). Returns false if there was none. */
  public boolean restore() throws IOException {
    boolean had = state.restore(portChanges, groupMods, flowMods, planner);
    tableMoves.restore();
    return had;
  }

  /** Starts the 1 s tick and, on the core thread, the warm-up of the port-change path. */
  public void start() {
    exec.scheduleWithFixedDelay(timeouts::tick, 1, 1, TimeUnit.SECONDS);
    exec.execute(() -> WarmUp.run(topo, vs.tables() + 2, exec));
  }
}
