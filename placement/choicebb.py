"""An exact answer to the proof's question "is there a choice of one configuration per group with cost <= ask
and every budget row within its budget?" on a small core, without CP-SAT; asked with `lowered`, a search for
the least such choice (within a slack) in one answer.

Groups are taken one at a time (fewest configurations first); the partial choices of the groups taken so
far are kept as states (their summed cost and row uses, identical ones once within a batch). A state is
dropped when no completion can meet the question, by a relaxation of the groups still to come:
- per column (the cost and each row): the state's sum plus each remaining group's least value is above
  the limit;
- per surrogate row w >= 0 (integers) over the columns: w . state + sum over the remaining groups of their
  least w . configuration > w . limits. With w = (1, prices) this is the Lagrangian (LP) bound of the
  remaining groups at those prices. The prices that bound a state best depend on the budget it leaves, so
  the prices are re-optimised (dual.py) for the budgets the least pruned state leaves, a few times a layer,
  on the groups still to come, and kept: every price vector gives a valid surrogate anywhere (``Prices``
  carries them from one question to the next);
- per budget row r the caller's prices bind, a kept-row table (``_Kept``, built once backwards over the
  groups): for each suffix of the groups and each level of row r's room, the least surrogate value (row r's
  weight 0) of a completion within that room, uses rounded down to KEPT_LEVELS levels. Row r is kept
  exactly (but for the rounding) instead of priced, and the bound does not weaken with depth (the
  surrogate rows' did: on long 200 seed 8 they stopped pruning by layer 17 of 21).
The states of a layer form batches of at most MAX_STATES, searched depth first (the part of most room by
the bounds first): memory stays bounded where a layer holds more, and a "yes" comes without the whole
layer. With `lowered`, each choice found of cost c lowers the ask to lowered(c) and the search goes on.
Every rule is a relaxation in exact integers (surrogates scaled to stay below 2^62 in int64), so "no" is a
proof; "yes" comes with a choice checked against every limit. The search is boxed (the caller's ``Work``,
in state x configuration x column cells, PASS_UNITS per price evaluation, level x configuration cells of
the tables; STATE_CELLS candidate cells at once): "unknown" when a box ends (or "yes" with the last choice
found, not marked least), and the caller asks CP-SAT instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from placement.dual import prices
from placement.work import Work

SURROGATE_BITS = 61  # sum over columns of w_c x (largest |value| a state or limit reaches in c): below 2^61
STATE_CELLS = 8_000_000  # states x configurations x columns of one layer's candidates at most (memory)
MAX_STATES = 10_000  # states of a batch at most (a layer's past it: split, searched depth first)
# Price re-optimisations per layer, on its least pruned state (measured: 3 took twice the CPU, no fewer unknown)
REPRICES = 1
REPRICE_STATES = 64  # ... only when the layer keeps more states than this (fewer: cheaper to carry them)
PRICE_PASSES = 40  # dual.prices' evaluations per re-optimisation
MAX_PRICES = 64  # price vectors carried into a question at most: the first (the caller's) and the latest
PASS_UNITS = 25_000  # work units charged per evaluation of dual.prices (its master LP; measured ~0.4 ms)
KEPT_LEVELS = 2048  # levels of a kept row's table (its uses rounded down to them)
INF = 2**62  # a table's "no completion" (sums of surrogate values stay below 2^61)


@dataclass
class Prices:
    """Price vectors of the budget rows (floating point, >= 0) found so far: any one gives a valid bound."""

    rows: list[np.ndarray] = field(default_factory=list)


@dataclass
class Answer:
    status: str  # yes | no | unknown
    chosen: list[int] | None = None  # global configuration per group (yes)
    least: bool = False  # (yes, asked with `lowered`) no choice costs at most lowered(its cost) (proven)


def exists(cost: np.ndarray, use: np.ndarray, budget: list[int], start: np.ndarray, alive: np.ndarray,
           ask: int, known: Prices, work: Work,
           lowered: Callable[[int], int] | None = None) -> Answer:  # fmt: skip
    """Whether a choice of one `alive` configuration per group (start[g]:start[g+1]) has sum(cost) <= ask
    and sum(use[:, r]) <= budget[r] for every row: "yes" with the choice, "no" (proven), or "unknown" when
    `work` ran out. With `lowered`, each choice found of cost c lowers the ask to lowered(c) < c and the
    search goes on: "yes" with the last choice found, marked ``Answer.least`` when the search ended (no
    choice costs at most lowered of its cost; with c - 1 it is the least), not when `work` ran out. New
    prices found are appended to `known`."""
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
    return _layers(values, limits, [cfg[g] for g in groups], groups, n_groups, known, work, lowered)


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
            known: Prices, work: Work, lowered: Callable[[int], int] | None) -> Answer:  # fmt: skip
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
    tables = _kept_tables(per, lim, known, span, work)
    # Depth first over batches of states (a batch: states of one layer, their choices so far): a batch past
    # MAX_STATES is split, its most promising part searched first, so a "yes" comes without the whole layer.
    stack = [(0, np.zeros((1, n_cols), dtype=np.int64), np.zeros((1, 0), dtype=np.int32))]
    found: list[int] | None = None
    while stack:
        j, states, chosen = stack.pop()
        if j == len(per):
            k = int(np.argmin(states[:, 0]))
            if states[k, 0] > lim[0]:
                continue  # (kept before a cheaper choice lowered the ask)
            found = _traced(chosen[k], cfg, groups, n_groups)
            if lowered is None:
                return Answer("yes", found)
            cost = int(states[k, 0])
            lim[0] = min(lowered(cost), cost - 1)  # (every later state is pruned against the lower ask)
            continue
        v = per[j]
        if len(states) > 1 and len(states) * len(v) * n_cols > STATE_CELLS:
            half = len(states) // 2
            stack += [(j, states[half:], chosen[half:]), (j, states[:half], chosen[:half])]
            continue
        work.charge(len(states) * len(v) * (n_cols + len(surrogates) + len(tables)))
        if work.over():
            return Answer("unknown") if found is None else Answer("yes", found)
        cand = (states[:, None, :] + v[None, :, :]).reshape(-1, n_cols)
        parent = np.repeat(np.arange(len(states)), len(v))
        pos = np.tile(np.arange(len(v)), len(states))
        ok = (cand + rest_min[j + 1] <= lim).all(1)
        if surrogates:
            w = np.array(surrogates)
            rest = np.array([r[j + 1] for r in rests])
            ok[ok] = (cand[ok] @ w.T + rest <= lim @ w.T).all(1)
        for tab in tables:
            ok[ok] = tab.slack(cand[ok], lim, j + 1) >= 0
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
            continue
        nxt = np.hstack([chosen[parent], pos[:, None].astype(np.int32)])
        if len(cand) > MAX_STATES:
            # Parts of at most MAX_STATES states, the one of most room (by every bound) taken first.
            room = _room(cand, surrogates, rests, lim, j)
            for tab in tables:
                room = np.minimum(room, tab.slack(cand, lim, j + 1) / max(int(tab.w[0]), 1))
            order = np.argsort(-room, kind="stable")[::-1]
            for part in np.array_split(order, -(-len(cand) // MAX_STATES)):
                part = np.sort(part)
                stack.append((j + 1, cand[part], nxt[part]))
        else:
            stack.append((j + 1, cand, nxt))
    return Answer("no") if found is None else Answer("yes", found, least=True)


@dataclass
class _Kept:
    """For kept rows: per suffix of the groups (from layer j on) and per levels t of the rows'
    room, the least surrogate value (the kept rows' weights 0) of a choice of the suffix whose uses, above
    each group's least and rounded down to levels of q, sum to at most t. Any completion within a row's
    room R lies within level floor(R / q) (a sum of floors is at most the floor of the sum): a relaxation."""

    rows: list[int]
    w: np.ndarray  # surrogate weights per column, 0 on the kept rows
    q: np.ndarray  # per kept row
    least: np.ndarray  # (layers + 1, kept rows): the suffix's summed least use of each row
    f: np.ndarray  # (layers + 1, *levels)

    def slack(self, cand: np.ndarray, lim: np.ndarray, j: int) -> np.ndarray:
        """Per state the surrogate's room the table leaves after the best completion: < 0 when no
        completion can meet every limit."""
        room = lim[self.rows] - cand[:, self.rows] - self.least[j]
        fits = (room >= 0).all(1)
        t = np.minimum(np.maximum(room, 0) // self.q, np.array(self.f.shape[1:]) - 1)
        val = self.f[j][tuple(t.T)]
        return np.where(fits & (val < INF), lim @ self.w - cand @ self.w - val, -1)


def _kept_tables(per: list[np.ndarray], lim: np.ndarray, known: Prices, span: np.ndarray,
                 work: Work) -> list[_Kept]:  # fmt: skip
    """A table (``_Kept``) per budget row the caller's prices bind, the other rows priced at those prices."""
    if not known.rows:
        return []
    lam = known.rows[0]
    out = []
    for r in np.nonzero(lam > 0)[0].tolist():
        weights = np.concatenate([[1.0], lam])
        weights[r + 1] = 0.0
        w = _surrogate(weights, span)
        if w[0]:
            out.append(_kept_table(per, lim, [r + 1], w, KEPT_LEVELS, work))
    return out


def _kept_table(per: list[np.ndarray], lim: np.ndarray, rows: list[int], w: np.ndarray, levels: int,
                work: Work) -> _Kept:  # fmt: skip
    """The table of `rows` with surrogate weights w, built backwards over the layers."""
    mins = np.array([v[:, rows].min(0) for v in per], dtype=np.int64).reshape(len(per), len(rows))
    least = np.vstack([np.cumsum(mins[::-1], 0)[::-1], np.zeros((1, len(rows)), dtype=np.int64)])
    room = np.maximum(lim[rows] - least[0], 0)
    q = np.maximum(1, -(-room // levels))
    top = room // q
    shape = tuple((top + 1).tolist())
    f = np.zeros((len(per) + 1, *shape), dtype=np.int64)
    for j in range(len(per) - 1, -1, -1):
        lev = (per[j][:, rows] - mins[j]) // q
        val = per[j] @ w
        ok = (lev <= top).all(1)
        lev, val = lev[ok], val[ok]
        # One entry per distinct level vector: its least value.
        key, inv = np.unique(lev, axis=0, return_inverse=True)
        best = np.full(len(key), INF, dtype=np.int64)
        np.minimum.at(best, inv.ravel(), val)
        new = np.full(shape, INF, dtype=np.int64)
        nxt = f[j + 1]
        for e, x in zip(key.tolist(), best.tolist(), strict=True):
            dst = tuple(slice(k, None) for k in e)
            src = tuple(slice(0, t + 1 - k) for k, t in zip(e, top.tolist(), strict=True))
            np.minimum(new[dst], nxt[src] + x, out=new[dst])
        f[j] = new
        work.charge(len(key) * int(np.prod(shape)))
    return _Kept(rows, w, q, least, f)


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


def _traced(chosen: np.ndarray, cfg: list[np.ndarray], groups: list[int], n_groups: int) -> list[int]:
    """The global configuration per group of a final state's positions per layer."""
    out = [-1] * n_groups
    for j, p in enumerate(chosen.tolist()):
        out[groups[j]] = int(cfg[j][p])
    return out
