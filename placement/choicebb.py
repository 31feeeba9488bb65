"""An exact answer to the proof's question "is there a choice of one configuration per group with cost <= ask
and every budget row within its budget?" on a small core, without CP-SAT.

Groups are taken one at a time (fewest configurations first); the partial choices of the groups taken so
far are kept as states (their summed cost and row uses, identical ones once). A state is dropped when no
completion can meet the question, by a relaxation of the groups still to come:
- per column (the cost and each row): the state's sum plus each remaining group's least value is above
  the limit;
- per surrogate row w >= 0 (integers) over the columns: w . state + sum over the remaining groups of their
  least w . configuration > w . limits. With w = (1, prices) this is the Lagrangian (LP) bound of the
  remaining groups at those prices. The prices that bound a state best depend on the budget it leaves, so
  the prices are re-optimised (dual.py) for the budgets the least pruned state leaves, a few times a layer,
  on the groups still to come, and kept: every price vector gives a valid surrogate anywhere (``Prices``
  carries them from one question to the next).
Every rule is a relaxation in exact integers (surrogates scaled to stay below 2^62 in int64), so "no" is a
proof; "yes" comes with a choice checked against every limit. The search is boxed (the caller's ``Work``,
in state x configuration x column cells and PASS_UNITS per price evaluation; at most MAX_STATES states a
layer, STATE_CELLS candidate cells at once): "unknown" when a box ends, and the caller asks CP-SAT instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placement.dual import prices
from placement.work import Work

SURROGATE_BITS = 61  # sum over columns of w_c x (largest |value| a state or limit reaches in c): below 2^61
STATE_CELLS = 8_000_000  # states x configurations x columns of one layer's candidates at most (memory)
MAX_STATES = 10_000  # states of a layer at most (measured: past it the bounds had stopped pruning)
# Price re-optimisations per layer, on its least pruned state (measured: 3 took twice the CPU, no fewer unknown)
REPRICES = 1
REPRICE_STATES = 64  # ... only when the layer keeps more states than this (fewer: cheaper to carry them)
PRICE_PASSES = 40  # dual.prices' evaluations per re-optimisation
MAX_PRICES = 64  # price vectors carried into a question at most: the first (the caller's) and the latest
PASS_UNITS = 25_000  # work units charged per evaluation of dual.prices (its master LP; measured ~0.4 ms)


@dataclass
class Prices:
    """Price vectors of the budget rows (floating point, >= 0) found so far: any one gives a valid bound."""

    rows: list[np.ndarray] = field(default_factory=list)


@dataclass
class Answer:
    status: str  # yes | no | unknown
    chosen: list[int] | None = None  # global configuration per group (yes)


def exists(cost: np.ndarray, use: np.ndarray, budget: list[int], start: np.ndarray, alive: np.ndarray,
           ask: int, known: Prices, work: Work) -> Answer:  # fmt: skip
    """Whether a choice of one `alive` configuration per group (start[g]:start[g+1]) has sum(cost) <= ask
    and sum(use[:, r]) <= budget[r] for every row: "yes" with the choice, "no" (proven), or "unknown" when
    `work` ran out. New prices found are appended to `known`."""
    n_groups = len(start) - 1
    counts = np.add.reduceat(alive.astype(np.int64), start[:-1]) if n_groups else np.zeros(0, dtype=np.int64)
    if (counts == 0).any():
        return Answer("no")
    limits = [int(ask), *(int(b) for b in budget)]
    values = np.column_stack([cost, use]).astype(np.int64)
    cfg = _feasible_alone(values, limits, start, alive)
    if cfg is None:
        return Answer("no")
    groups = sorted(range(n_groups), key=lambda g: (len(cfg[g]), g))
    return _layers(values, limits, [cfg[g] for g in groups], groups, n_groups, known, work)


def _feasible_alone(values: np.ndarray, limits: list[int], start: np.ndarray,
                    alive: np.ndarray) -> list[np.ndarray] | None:  # fmt: skip
    """Per group its alive configurations that fit every limit with each other group at its least value in
    every column (repeated while that drops any); None when a group is left with none."""
    n_groups = len(start) - 1
    cfg = [start[g] + np.nonzero(alive[start[g] : start[g + 1]])[0] for g in range(n_groups)]
    lim = np.array(limits, dtype=object)
    while True:
        mins = [values[ks].min(0) for ks in cfg]
        total = sum((m.astype(object) for m in mins), np.zeros(values.shape[1], dtype=object))
        changed = False
        for g, ks in enumerate(cfg):
            room = lim - (total - mins[g].astype(object))
            keep = (values[ks].astype(object) <= room).all(1).astype(bool)
            if not keep.any():
                return None
            if not keep.all():
                cfg[g], changed = ks[keep], True
        if not changed:
            return cfg


def _surrogate(weights: np.ndarray, span: np.ndarray) -> np.ndarray:
    """Integer surrogate row >= 0 proportional to `weights` (per column), scaled so that its products with
    every value a state or limit reaches (|.| <= span per column) sum below 2^SURROGATE_BITS."""
    if not np.isfinite(weights).all():
        return np.zeros(len(weights), dtype=np.int64)  # (no surrogate: dropped by the caller)
    weights = np.maximum(weights, 0.0)  # (a negative weight would not give a relaxation)
    top = float((weights * span.astype(float)).sum())
    scale = 2.0**SURROGATE_BITS / max(top, 1.0) / 2.0  # (float rounding: half again)
    return np.floor(weights * scale).astype(np.int64)


def _layers(values: np.ndarray, limits: list[int], cfg: list[np.ndarray], groups: list[int], n_groups: int,
            known: Prices, work: Work) -> Answer:  # fmt: skip
    """The breadth-first search over the groups in the order of `cfg` (module doc)."""
    n_cols = values.shape[1]
    per = [values[ks] for ks in cfg]
    mins = np.array([v.min(0) for v in per], dtype=np.int64).reshape(len(per), n_cols)
    rest_min = np.vstack([np.cumsum(mins[::-1], 0)[::-1], np.zeros((1, n_cols), dtype=np.int64)])
    span = np.abs(values[np.concatenate(cfg)]).max(0) * len(per) + np.abs(np.array(limits, dtype=np.int64))
    lim = np.array(limits, dtype=np.int64)
    flat = np.concatenate(per)
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in per])])
    surrogates: list[np.ndarray] = []
    rests: list[np.ndarray] = []

    def add(weights: np.ndarray) -> None:
        w = _surrogate(weights, span)
        if not w.any():
            return
        v = flat @ w
        least = np.minimum.reduceat(v, offsets[:-1])
        surrogates.append(w)
        rests.append(np.concatenate([np.cumsum(least[::-1])[::-1], [0]]))
        work.charge(len(flat))

    for lam in known.rows[:1] + known.rows[1:][-(MAX_PRICES - 1) :]:
        add(np.concatenate([[1.0], lam]))
    states = np.zeros((1, n_cols), dtype=np.int64)
    trail: list[tuple[np.ndarray, np.ndarray]] = []  # per layer: (parent state, configuration position)
    for j, v in enumerate(per):
        if len(states) * len(v) * n_cols > STATE_CELLS:
            return Answer("unknown")
        work.charge(len(states) * len(v) * (n_cols + len(surrogates)))
        if work.over():
            return Answer("unknown")
        cand = (states[:, None, :] + v[None, :, :]).reshape(-1, n_cols)
        parent = np.repeat(np.arange(len(states)), len(v))
        pos = np.tile(np.arange(len(v)), len(states))
        ok = (cand + rest_min[j + 1] <= lim).all(1)
        if surrogates:
            w = np.array(surrogates)
            rest = np.array([r[j + 1] for r in rests])
            ok[ok] = (cand[ok] @ w.T + rest <= lim @ w.T).all(1)
        cand, parent, pos = cand[ok], parent[ok], pos[ok]
        for _ in range(REPRICES if j + 1 < len(per) and len(cand) > REPRICE_STATES else 0):
            left = lim - cand[_least_pruned(cand, surrogates, rests, lim, j)]
            lam = _prices_for(flat, offsets, j + 1, left, work)
            if lam is None:
                break
            known.rows.append(lam)
            add(np.concatenate([[1.0], lam]))
            ok = cand @ surrogates[-1] + rests[-1][j + 1] <= lim @ surrogates[-1]
            cand, parent, pos = cand[ok], parent[ok], pos[ok]
            if not len(cand):
                break
        if len(cand) > 1:
            _, first = np.unique(cand, axis=0, return_index=True)
            first.sort()
            cand, parent, pos = cand[first], parent[first], pos[first]
        if not len(cand):
            return Answer("no")
        if len(cand) > MAX_STATES:
            return Answer("unknown")  # (the bounds no longer prune: CP-SAT's search does better)
        trail.append((parent, pos))
        states = cand
    return Answer("yes", _traced(trail, cfg, groups, n_groups))


def _room(cand: np.ndarray, surrogates: list[np.ndarray], rests: list[np.ndarray], lim: np.ndarray,
          j: int) -> np.ndarray:  # fmt: skip
    """Per state the room its tightest surrogate leaves (relative to the surrogate's cost weight; the cost
    room without surrogates), a guide only."""
    if not surrogates:
        return (lim[0] - cand[:, 0]).astype(float)
    w = np.array(surrogates)
    room = (lim @ w.T - cand @ w.T - np.array([r[j + 1] for r in rests])) / np.maximum(w[:, 0], 1)
    return room.min(1)


def _least_pruned(cand: np.ndarray, surrogates: list[np.ndarray], rests: list[np.ndarray], lim: np.ndarray,
                  j: int) -> int:  # fmt: skip
    """The state with the most room (``_room``): the one new prices should bound."""
    return int(np.argmax(_room(cand, surrogates, rests, lim, j)))


def _prices_for(
    flat: np.ndarray, offsets: np.ndarray, j: int, left: np.ndarray, work: Work
) -> np.ndarray | None:
    """Lagrangian prices of the rows for the groups from the j-th on, with the budgets `left` (dual.py;
    PRICE_PASSES evaluations at most, each charged to `work`)."""
    sub = flat[offsets[j] :]
    pr = prices(sub[:, 1:], left[1:].tolist(), sub[:, 0], offsets[j:] - offsets[j], np.ones(len(sub), dtype=bool),
                work.deadline, max_passes=PRICE_PASSES, clock=work.clock)  # fmt: skip
    if pr is not None:
        work.charge(pr.passes * (len(sub) + PASS_UNITS))
    return None if pr is None else pr.lam


def _traced(trail: list[tuple[np.ndarray, np.ndarray]], cfg: list[np.ndarray], groups: list[int],
            n_groups: int) -> list[int]:  # fmt: skip
    """The choice of the first final state, followed back through the layers."""
    chosen = [-1] * n_groups
    state = 0
    for j in range(len(trail) - 1, -1, -1):
        parent, pos = trail[j]
        chosen[groups[j]] = int(cfg[j][pos[state]])
        state = int(parent[state])
    return chosen
