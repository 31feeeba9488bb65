"""A placement's costs and feasibility, recomputed from first principles (pure; the tests' oracle)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from placement.model import HOST, Problem, chain_latency


@dataclass(frozen=True)
class Evaluation:
    host_cost: Fraction
    snic_load: dict[str, Fraction]
    # snic -> {"up": sNIC->host, "down": host->sNIC}: the vertices' crossings plus the sNIC's background
    pcie: dict[str, dict[str, Fraction]]
    violations: list[str]
    snic_resources: dict[str, dict[str, Fraction]]  # snic -> resource -> amount used (multi-resource)
    chain_latency: dict[str, Fraction] = field(default_factory=dict)  # chain id -> per-packet latency (us)

    @property
    def feasible(self) -> bool:
        return not self.violations


def evaluate(
    problem: Problem, placement: dict[str, str], costs: tuple[list[Fraction], list[Fraction]] | None = None
) -> Evaluation:
    """`costs`: (problem.host_costs(), problem.nic_costs()) when the caller has them (the same values)."""
    if costs is None:
        loads = problem.loads()
        costs = problem.host_costs(loads), problem.nic_costs(loads)
    hcost, ncost = costs
    host_cost = Fraction(0)
    snic_load = {s.id: Fraction(0) for s in problem.snics}
    used = {s.id: {r: Fraction(0) for r in problem.resource_names} for s in problem.snics}
    violations = []
    for i, n in enumerate(problem.nodes):
        loc = placement[n.id]
        if loc not in problem.allowed(n):
            violations.append(f"{n.id} may not be on {loc}")
        if not n.placed:
            continue
        if loc == HOST:
            host_cost += hcost[i]
        else:
            snic_load[loc] += ncost[i]
            for r, amount in n.needs.items():
                used[loc][r] += amount
    pcie = {s.id: dict(s.background) for s in problem.snics}  # on the link whatever the placement
    for e in problem.edges:
        a, b = placement[e.src], placement[e.dst]
        if a == b:
            continue
        if a != HOST:
            pcie[a]["up"] += e.gbps  # leaves sNIC a toward the host (and on to b)
        if b != HOST:
            pcie[b]["down"] += e.gbps
    for s in problem.snics:
        if snic_load[s.id] > s.capacity:
            violations.append(f"capacity of {s.id}: {float(snic_load[s.id]):g} > {float(s.capacity):g}")
        for r, have in s.resources.items():
            if used[s.id][r] > have:
                violations.append(f"resource {r} of {s.id}: {float(used[s.id][r]):g} > {float(have):g}")
        up, down = pcie[s.id]["up"], pcie[s.id]["down"]
        if problem.pcie_model == "shared":
            if up + down > s.pcie_gbps:
                violations.append(f"pcie of {s.id}: {float(up + down):g} > {float(s.pcie_gbps):g} Gbit/s")
        else:
            for d, v in (("up", up), ("down", down)):
                if v > s.pcie_gbps:
                    violations.append(f"pcie of {s.id} ({d}): {float(v):g} > {float(s.pcie_gbps):g} Gbit/s")
    lat, late = latencies(problem, placement)
    return Evaluation(host_cost, snic_load, pcie, violations + late, used, lat)


def latencies(problem: Problem, placement: dict[str, str]) -> tuple[dict[str, Fraction], list[str]]:
    """Every chain's latency under `placement`, and a violation per chain over its latency_us."""
    lat = {c.id: chain_latency(problem, c, placement) for c in problem.chains}
    late = [f"latency of chain {c.id}: {float(lat[c.id]):g} > {float(c.latency_us):g} us"
            for c in problem.chains if c.latency_us is not None and lat[c.id] > c.latency_us]  # fmt: skip
    return lat, late


def pcie_total(ev: Evaluation) -> Fraction:
    return sum((d["up"] + d["down"] for d in ev.pcie.values()), Fraction(0))


def moves(problem: Problem, placement: dict[str, str]) -> list[dict]:
    return [
        {"id": n.id, "from": n.location, "to": placement[n.id]}
        for n in problem.nodes
        if n.placed and n.location is not None and n.location != placement[n.id]
    ]
