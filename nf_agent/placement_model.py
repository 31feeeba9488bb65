"""The agent's placement model: the placement instance (docs/placement.md) built from its state and the latest
measurement, and the evaluation of the current placement against it."""

from __future__ import annotations

from dataclasses import replace

from domain.model import Nf
from nf_agent import graph
from nf_agent.background import pcie_background
from nf_agent.context import AgentContext
from nf_agent.tables import TABLE_PROFILE, pipeline_edges, table_nodes, through_gbps
from placement import parse_problem
from placement.evaluate import Evaluation, evaluate
from placement.model import Problem


class PlacementModel:
    def __init__(self, ctx: AgentContext):
        self.ctx = ctx

    def measured_edges(self) -> dict[tuple[str, str], float]:
        m = self.ctx.monitor.measurement
        return dict(m.edges) if m else {}

    def current_placement(self) -> dict[str, str]:
        return {k: n.location for k, n in self.ctx.state.nfs.items() if n.location}

    def problem(
        self,
        nfs: list[Nf],
        fixed: set[str] = frozenset(),
        tables: tuple[list[dict], list[dict]] | None = None,
    ) -> dict:
        """The placement instance (graph.build_problem) under the latest measurement: a scaled-out NF at
        several locations is one vertex per location, its traffic divided by its ports' measured split;
        each sNIC's PCIe link carries its measured background (`pcie_background`). `tables`: OneSwitch's
        tables as vertices and their pipeline's edges (`table_graph`); None: the tables last seen, fixed
        where they run (their sNIC capacity and rules are taken)."""
        return self._graph(nfs, fixed, self.pcie_background(), tables)

    def with_every_chain(self) -> dict:
        """The instance of every NF with every serial chain in `chains` (SLO or not), for predicted latencies."""
        return self._graph(
            list(self.ctx.state.nfs.values()), background=self.pcie_background(), every_chain=True
        )

    def table_graph(
        self, seen: list, pins: dict[int, str], fixed: bool = False
    ) -> tuple[list[dict], list[dict]]:
        """OneSwitch's tables `seen` (TableState-like) as vertices and the edges of their pipeline, from
        each live sNIC's first Ethernet port to the first VM and back, carrying its measured PCIe Gbit/s
        (nf_agent/tables.py); without a VM the tables have `through_gbps` and no edges."""
        ctx = self.ctx
        m = ctx.monitor.measurement
        pcie = m.pcie if m else None
        snics = [s for s in ctx.cfg.snics if s.id not in ctx.down]
        vms = list(ctx.state.vms)
        wire = {s.id: graph.eth_vertex(s.id, 0) for s in snics if s.eth_ports}
        edges = pipeline_edges(seen, pcie, wire, vms[0] if vms else None)
        gbps = 0.0 if edges else through_gbps(pcie)
        profile = ctx.cfg.profiles.get(TABLE_PROFILE, {})
        return table_nodes(seen, profile, gbps, [s.id for s in snics], pins, fixed=fixed), edges

    def all_nfs(self) -> dict:
        """The instance of every NF of the agent."""
        return self.problem(list(self.ctx.state.nfs.values()))

    def _graph(
        self,
        nfs: list[Nf],
        fixed: set[str] = frozenset(),
        background: dict | None = None,
        tables: tuple[list[dict], list[dict]] | None = None,
        every_chain: bool = False,
    ) -> dict:
        """A dead sNIC is no location, and its Ethernet ports no vertices (their traffic is gone with it); an NF
        still recorded there (its failover failed) counts as being nowhere yet."""
        ctx = self.ctx
        m = ctx.monitor.measurement
        snics = [s for s in ctx.cfg.snics if s.id not in ctx.down]
        if ctx.down:
            nfs = [n if n.location not in ctx.down else replace(n, location=None, instances=[]) for n in nfs]
        nodes, edges = tables if tables is not None else self.table_graph(ctx.tables_seen, {}, fixed=True)
        return graph.build_problem(
            snics, list(ctx.state.vms), nfs, ctx.cfg.profiles, self.measured_edges(), fixed,
            measured_split=m.nf_split if m else None, background=background, tables=nodes, table_edges=edges,
            every_chain=every_chain,
        )  # fmt: skip

    def pcie_background(self) -> dict[str, dict[str, float]]:
        """Per sNIC: the measured PCIe Gbit/s the model of the current NFs at their current locations does not
        predict (nf_agent/background.py: traffic through no NF, beyond a noise floor); {} before a
        measurement."""
        m = self.ctx.monitor.measurement
        if m is None or not m.pcie:
            return {}
        problem = parse_problem(self._graph(list(self.ctx.state.nfs.values())))
        _, ev = self.evaluate(problem, self.current_placement())
        return pcie_background(m.pcie, {s: {d: float(x) for d, x in v.items()} for s, v in ev.pcie.items()})

    @staticmethod
    def evaluate(problem: Problem, placement: dict[str, str]) -> tuple[dict[str, str], Evaluation]:
        """`placement` completed for every vertex of `problem` (a vertex it does not name at its first allowed
        location) and its evaluation."""
        full = {n.id: placement.get(n.id, problem.allowed(n)[0]) for n in problem.nodes}
        return full, evaluate(problem, full)
