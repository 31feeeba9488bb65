"""Re-placement decision: solve with the measured matrix, then hysteresis + dampening decide (pure).

The solver is passed in (`solve(problem_json) -> result`), the clock value too; the caller migrates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from placement import parse_problem
from placement.evaluate import evaluate
from placement.hysteresis import Dampener


@dataclass
class Decision:
    go: bool
    why: str
    moves: list[dict] = field(default_factory=list)  # [{"id", "from", "to"}]
    current_cost: float | None = None
    new_cost: float | None = None
    result: dict | None = None  # the solver's output (docs/placement.md)

    def to_json(self) -> dict:
        return {
            "go": self.go,
            "why": self.why,
            "moves": self.moves,
            "current_host_cost": self.current_cost,
            "new_host_cost": self.new_cost,
            "solve": self.result,
        }


def decide(
    problem_json: dict,
    current: dict[str, str],
    solve: Callable[[dict], dict],
    dampener: Dampener,
    now: float,
    force: bool = False,
) -> Decision:
    """Whether to move from `current` (nf id -> location) to the solver's optimum for `problem_json`.

    A current placement that violates a capacity or PCIe budget under the new traffic is left as soon as
    a feasible one exists (no hysteresis, no dampening); otherwise the saving must beat the dampener's
    threshold and its window must allow (`force` bypasses the window only).
    """
    if not current:
        return Decision(False, "no NFs to place")
    problem = parse_problem(problem_json)
    res = solve(problem_json)
    if res.get("status") not in ("optimal", "feasible"):
        return Decision(False, f"solver: {res.get('status')}: {res.get('reason', '')}".strip(), result=res)
    full_current = {n.id: (current.get(n.id) or problem.allowed(n)[0]) for n in problem.nodes}
    ev = evaluate(problem, full_current)
    cur_cost, new_cost = float(ev.host_cost), float(res["host_cost"])
    # An NF the model splits over several locations (agent/graph.py) is no solver vertex (its vertices are
    # ID@LOC, pinned): it stays where it runs, and hysteresis compares placements of the same NFs.
    new = {k: res["placement"].get(k, v) for k, v in current.items()}
    moves = [{"id": k, "from": current[k], "to": v} for k, v in sorted(new.items()) if current[k] != v]
    d = Decision(False, "", moves, cur_cost, new_cost, res)
    if not moves:
        d.why = "already optimal"
        return d
    if ev.violations:
        d.go, d.why = True, "current placement violates " + "; ".join(ev.violations)
        return d
    damp = dampener
    if force:
        damp = Dampener(dampener.threshold, dampener.rel_threshold, 0.0, dampener.flap_window)
        damp.left = dict(dampener.left)
    d.go, d.why = damp.decide(now, current, cur_cost, new, new_cost)
    return d
