"""Read-only views of the agent for the REST API: the placement (current, predicted, measured, history) and
the virtual ports."""

from __future__ import annotations

from domain import vports
from domain.model import HOST, Nf
from nf_agent import graph
from nf_agent.context import AgentContext
from nf_agent.placement_model import PlacementModel
from placement import parse_problem
from placement.model import Problem, chain_latency


def all_on_host(problem: Problem) -> dict[str, str]:
    """Every vertex that may run on the host placed there (the others where they must be)."""
    return {n.id: HOST for n in problem.nodes if HOST in problem.allowed(n)}


class Views:
    def __init__(self, ctx: AgentContext, model: PlacementModel):
        self.ctx = ctx
        self.model = model

    def placement_view(self) -> dict:
        ctx = self.ctx
        with ctx.lock:
            current = self.model.current_placement()
            nfs = list(ctx.state.nfs.values())
            problem_json = self.model.problem(nfs)
            predicted = None
            if nfs:
                problem = parse_problem(problem_json)
                _, ev = self.model.evaluate(problem, current)
                _, all_host = self.model.evaluate(problem, all_on_host(problem))
                predicted = {
                    "host_cores": float(ev.host_cost),
                    # the same NFs and traffic with every NF on the host: what the offload saves
                    "all_host_cores": float(all_host.host_cost),
                    "snic_load": {k: float(v) for k, v in ev.snic_load.items()},
                    # the link's load: the NFs' crossings plus the background, comparable to `measured`
                    "pcie_gbps": {k: {d: float(x) for d, x in v.items()} for k, v in ev.pcie.items()},
                    "background_gbps": {
                        s.id: {d: float(x) for d, x in s.background.items()} for s in problem.snics
                    },
                    "violations": ev.violations,
                    "split": self._split_view(nfs, problem),
                }
            m = ctx.monitor.measurement
            return {
                "locations": current,
                "predicted": predicted,
                "measured": m.to_json() if m else None,
                "traffic": problem_json["edges"],
                "last_solve": ctx.last_decision.to_json() if ctx.last_decision else None,
                "history": ctx.state.history[-20:],
            }

    def _split_view(self, nfs: list[Nf], problem: Problem) -> dict:
        """Per NF running at several locations: each location's instances, shares of the NF's traffic (which
        directions measured), load and predicted cost there (host cores or sNIC units)."""
        m = self.ctx.monitor.measurement
        loads, hcost, ncost = problem.loads(), problem.host_costs(), problem.nic_costs()
        out = {}
        for nf in nfs:
            sp = graph.nf_split(nf, m.nf_split.get(nf.id) if m else None)
            if sp is None:
                continue
            locs = sp.to_json()
            for loc, row in locs.items():
                i = problem.index[graph.split_vertex(nf.id, loc)]
                row["load_gbps"] = float(loads[i])
                row |= {"host_cores": float(hcost[i])} if loc == HOST else {"snic_units": float(ncost[i])}
            out[nf.id] = {"measured": list(sp.measured), "locations": locs}
        return out

    def chains(self) -> list[dict]:
        """Every serial chain of NFs with its predicted per-packet latency under the current placement (the NFs'
        profiled latencies where they run plus each PCIe crossing's, docs/placement.md) and its SLO."""
        ctx = self.ctx
        with ctx.lock:
            if not ctx.state.nfs:
                return []
            problem = parse_problem(self.model.with_every_chain())
            full, _ = self.model.evaluate(problem, self.model.current_placement())
        return [chain_row(problem, c, full) for c in problem.chains]

    def nf_latency(self, nf_id: str) -> dict | None:
        """The NF's own predicted latency where it runs and its chain's (`chains`), None before it is placed."""
        with self.ctx.lock:
            nf = self.ctx.state.nfs.get(nf_id)
            where = nf.location if nf else None
            prof = self.ctx.cfg.profiles.get(nf.type, {}) if nf else {}
        if where is None:
            return None
        own = (prof.get("latency_us") or {}).get("host" if where == HOST else "nic", 0.0)
        chain = next((c for c in self.chains() if nf_id in c["vertices"]), None)
        return {"nf_us": own, "chain": chain}

    def ports(self) -> list[dict]:
        ctx = self.ctx
        with ctx.lock:
            out = [{"vport": v.vport, "kind": "vm", "owner": v.id} for v in ctx.state.vms.values()]
            out += [{"vport": n.vport, "kind": "nf", "owner": n.id} for n in ctx.state.nfs.values()]
            out += [
                {
                    "vport": vports.vport_eth(int(s.id[4:]), j),
                    "kind": "eth",
                    "owner": graph.eth_vertex(s.id, j),
                }
                for s in ctx.cfg.snics
                for j in range(s.eth_ports)
            ]
            return sorted(out, key=lambda p: p["vport"])


def chain_row(problem: Problem, chain, placement: dict[str, str]) -> dict:
    """One chain's view: vertices, their locations, predicted latency (us), SLO, PCIe crossings."""
    locs = [placement[v] for v in chain.vertices]
    crossings = sum(
        (a != HOST) + (b != HOST) for a, b in zip(locs, locs[1:], strict=False) if a != b
    )  # sNIC to sNIC crosses both links
    lat = float(chain_latency(problem, chain, placement))
    slo = None if chain.latency_us is None else float(chain.latency_us)
    return {
        "id": chain.id,
        "vertices": list(chain.vertices),
        "locations": locs,
        "predicted_latency_us": round(lat, 2),
        "slo_us": slo,
        "within_slo": None if slo is None else lat <= slo,
        "pcie_crossings": crossings,
    }
