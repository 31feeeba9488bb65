"""Why a placed vertex stays on the host (pure): the budget that moving it alone to an sNIC would break.

Operators of switch offload ask this of every table kept on the host. The answer is counterfactual: with
every other vertex where the placement puts it, move this one to each sNIC it may go to and name what the
first (by preference) sNIC lacks; a move that breaks nothing and saves host cost is blocked only by the
solver's other terms (moves budget, PCIe tie-break), and one that saves nothing is "no gain".
"""

from __future__ import annotations

from placement.evaluate import evaluate
from placement.model import HOST, RULES, Problem

# The reasons, most specific first (the order picks one when a move would break several budgets).
PINNED = "pinned"
MEMORY = "memory"  # the sNIC's max_rules (or another declared resource)
CAPACITY = "capacity"
PCIE = "pcie"
LATENCY = "latency"
NO_GAIN = "no gain"
MOVES = "moves budget"
NO_SNIC = "no sNIC"


def _kind(violation: str) -> str:
    if violation.startswith("resource "):
        return MEMORY
    if violation.startswith("capacity of "):
        return CAPACITY
    if violation.startswith("pcie of "):
        return PCIE
    if violation.startswith("latency of "):
        return LATENCY
    return CAPACITY


def why_on_host(problem: Problem, placement: dict[str, str], vertex: str) -> dict:
    """{"reason": one of the names above, "detail": the broken budget(s) or ""} for `vertex`, which the
    placement keeps on the host. Only budgets the move newly breaks count (a placement already over a budget
    does not blame every vertex)."""
    node = problem.nodes[problem.index[vertex]]
    if node.pinned == HOST:
        return {"reason": PINNED, "detail": "pinned to the host"}
    snics = [loc for loc in problem.allowed(node) if loc != HOST]
    if not snics:
        return {"reason": NO_SNIC, "detail": "no sNIC to run on"}
    before = set(evaluate(problem, placement).violations)
    gain = problem.host_costs()[problem.index[vertex]]
    blocked: list[list[str]] = []
    for loc in snics:
        broken = [v for v in evaluate(problem, {**placement, vertex: loc}).violations if v not in before]
        if not broken:
            return {
                "reason": MOVES if gain > 0 else NO_GAIN,
                "detail": "" if gain > 0 else "saves no host CPU",
            }
        blocked.append(broken)
    first = blocked[0]
    kinds = sorted({_kind(v) for v in first}, key=[MEMORY, CAPACITY, PCIE, LATENCY].index)
    return {"reason": kinds[0], "detail": "; ".join(first)}


def rules_used(problem: Problem, placement: dict[str, str]) -> dict[str, int]:
    """sNIC -> rules its offloaded tables hold under `placement`."""
    used = {s.id: 0 for s in problem.snics}
    for n in problem.nodes:
        loc = placement.get(n.id, HOST)
        if loc != HOST and RULES in n.needs:
            used[loc] += int(n.needs[RULES])
    return used
