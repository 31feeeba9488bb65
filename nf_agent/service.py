"""The agent: VMs and NFs requested northbound, placed, started, wired into OneSwitch, monitored, re-placed.

`Agent` is a facade over the jobs that do the work, each in its own module, all sharing one `AgentContext`
(configuration, the injected NF runtime, port mapper, clock and solver, the persisted state under one lock):

- `Inventory` (inventory.py): VM/NF create, update, delete, each complete or rolled back;
- `Moves` (moves.py): migrate (the ONE place that moves an NF) and scale;
- `Autoscaler` (autoscaling.py): resizes NFs with an autoscale policy from their measured load;
- `Balancer` (balancing.py): weighs a scaled-out NF's select buckets by the load each instance gets;
- `Supervisor` (supervisor.py): restarts, standbys, failover, health;
- `Replacement` (replacement.py): sampling and the re-placement loop;
- `reconcile` (reconcile.py): adopting what runs after an agent restart;
- `Views` (views.py): the placement and port views;
- `Updates` (update.py): live update to another nf version (and rollback), config in place;
- `TableOffload` (table_offload.py): OneSwitch's virtual tables placed on the host or an sNIC (issue 27).

Failures are domain errors (domain/errors.py); the REST edge (api.py) maps them to HTTP statuses.
"""

from __future__ import annotations

from pathlib import Path

from nf_agent.autoscaling import Autoscaler
from nf_agent.balancing import Balancer
from nf_agent.context import AgentConfig, AgentContext, RestartPolicy
from nf_agent.inventory import Inventory
from nf_agent.moves import Moves
from nf_agent.placement_model import PlacementModel
from nf_agent.reconcile import reconcile
from nf_agent.replacement import Replacement
from nf_agent.supervisor import Supervisor
from nf_agent.table_offload import TableOffload
from nf_agent.update import Updates
from nf_agent.views import Views
from nf_local.processes import NF_BINARY
from nf_local.versions import DEFAULT_DIR, NfVersions

__all__ = ["Agent", "AgentConfig", "RestartPolicy"]


class Agent:
    def __init__(self, *args, nf_versions: Path = DEFAULT_DIR, **kwargs):
        """The arguments of `AgentContext`: config, NF runtime, port mapper, state file path; optionally the
        clock, the solver (placement instance -> output), the drain bound of a move (s) and OneSwitch's
        tables (`tables=`, a TableSwitch: switching offload). `nf_versions`: the
        directory of versioned nf binaries (`VERSION/nf`) live updates roll to."""
        self.ctx = ctx = AgentContext(*args, **kwargs)
        self.model = PlacementModel(ctx)
        self.inventory = Inventory(ctx, self.model)
        self.moves = Moves(ctx, self.model)
        self.supervisor = Supervisor(ctx)
        self.replacement = Replacement(ctx, self.model, self.moves)
        self.views = Views(ctx, self.model)
        self.autoscaler = Autoscaler(ctx, self.moves)
        self.autoscale = self.autoscaler.tick
        self.balancer = Balancer(ctx, self.moves)
        self.balance = self.balancer.tick
        default = Path(getattr(ctx.runtime, "nf_binary", NF_BINARY))
        self.versions = NfVersions(nf_versions, default)
        self.updates = Updates(ctx, self.moves, self.versions)
        self.update, self.configure_nf = self.updates.update, self.updates.configure
        self.check_config = self.updates.check_config
        self.table_offload = TableOffload(ctx, self.model)
        self.tables, self.place_tables = self.table_offload.view, self.table_offload.place
        self.pin_table = self.table_offload.pin

        inv, mv, sup, rep = self.inventory, self.moves, self.supervisor, self.replacement
        self.create_vm, self.delete_vm = inv.create_vm, inv.delete_vm
        self.create_nf, self.update_nf, self.delete_nf = inv.create_nf, inv.update_nf, inv.delete_nf
        self.migrate, self.migrate_request, self.scale = mv.migrate, mv.migrate_request, mv.scale
        self.supervise, self.probe, self.instance_pids = sup.supervise, sup.probe, sup.instance_pids
        self.start_standby, self.stop_standby = sup.start_standby, sup.stop_standby
        self.restart_nf, self.failover, self.health = sup.restart_nf, sup.failover, sup.health
        self.snic_dead, self.snic_back, self.instance_failed = (
            sup.snic_dead,
            sup.snic_back,
            sup.instance_failed,
        )
        self.sample, self.wiring, self.run_placement = rep.sample, rep.wiring, rep.run_placement
        self.placement_view, self.ports = self.views.placement_view, self.views.ports
        self.chains, self.nf_latency = self.views.chains, self.views.nf_latency
        self.problem, self.pcie_background = self.model.problem, self.model.pcie_background
        self.current_placement, self.measured_edges = self.model.current_placement, self.model.measured_edges
        self.nf = ctx.nf

    def reconcile(self) -> list[str]:
        """After an agent restart: adopt running instances, restart dead ones, re-map missing ports."""
        return reconcile(self.ctx)

    # -- the shared state, for the REST edge, the CLI and tests ----------------------------------------------
    cfg = property(lambda self: self.ctx.cfg)
    runtime = property(lambda self: self.ctx.runtime)
    mapper = property(lambda self: self.ctx.mapper)
    solver = property(lambda self: self.ctx.solver)
    state_path = property(lambda self: self.ctx.state_path)
    lock = property(lambda self: self.ctx.lock)
    state = property(lambda self: self.ctx.state)
    monitor = property(lambda self: self.ctx.monitor)
    counters = property(lambda self: self.ctx.counters)
    standbys = property(lambda self: self.ctx.standbys)
    locations = property(lambda self: self.ctx.locations)
    last_decision = property(lambda self: self.ctx.last_decision)
    last_migration = property(lambda self: self.moves.last_migration)
    last_scale = property(lambda self: self.moves.last_scale)

    @property
    def move_state(self) -> bool:
        """Whether an NF with local state moves with its state (see `Moves.move_state`)."""
        return self.moves.move_state

    @move_state.setter
    def move_state(self, value: bool) -> None:
        self.moves.move_state = value
