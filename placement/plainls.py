"""A local search on the plain model's booleans: a complete, exactly feasible hint for its stage 1 (issue 25).

Where prepare gives up (components of hundreds of NFs joined by east-west edges), the plain CP-SAT model answers,
and it spends most of its time finding the optimum, not proving it (bench/RESULTS.md, hybrid21). This search
works on the rows exactly as the model has them (solver._Model records them: the working integers of every
capacity, resource, PCIe and latency row, each crossing indicator's definition, the stage-1 cost of every NF
at every location): one location per NF with a choice; moves of one NF to another location and pairs of such
moves (a swap). Screening is in floating point (numpy), every applied move is checked on the exact integers,
and the final placement is checked again from scratch: `hint()` gives a placement meeting every row, or None.
"""

from __future__ import annotations

import time

import numpy as np


class PlainSearch:
    """The plain model's stage 1 as a local search state. `model`: a built solver._Model (CP-SAT)."""

    def __init__(self, model) -> None:
        self.model = model
        p = model.p
        self.nfs = sorted({i for i, _ in model.x})
        self.pos = {i: k for k, i in enumerate(self.nfs)}
        self.locs = [p.allowed(p.nodes[i]) for i in self.nfs]
        self.xvar = [
            [model.x[(i, loc)].Index() for loc in locs] for i, locs in zip(self.nfs, self.locs, strict=True)
        ]
        self.xof: dict[int, tuple[int, int]] = {}  # x variable index -> (NF position, location number)
        for k, vids in enumerate(self.xvar):
            for j, v in enumerate(vids):
                self.xof[v] = (k, j)
        self.cost = [
            [model.ls_cost.get((i, loc), 0) for loc in locs]
            for i, locs in zip(self.nfs, self.locs, strict=True)
        ]
        self.rhs = [rhs for _, rhs in model.ls_rows]
        self.inc: dict[int, list[tuple[int, int]]] = {}  # variable index -> [(row, coefficient)]
        for r, (terms, _) in enumerate(model.ls_rows):
            for c, v in terms:
                self.inc.setdefault(v, []).append((r, c))
        # Crossing indicators: z >= a - b for each (a, b) pair (a variable index or a constant 0/1).
        self.zdef: dict[int, list[tuple]] = model.ls_z
        self.deps: dict[int, list[int]] = {}  # x variable index -> the indicators over it
        for z, pairs in self.zdef.items():
            for a, b in pairs:
                for t in (a, b):
                    if not isinstance(t, tuple):
                        self.deps.setdefault(t, [])
                        if z not in self.deps[t]:
                            self.deps[t].append(z)
        self.near: list[set[int]] = [set() for _ in self.nfs]  # NFs sharing an indicator
        for pairs in self.zdef.values():
            ks = {self.xof[t][0] for a, b in pairs for t in (a, b) if not isinstance(t, tuple)}
            for k in ks:
                self.near[k] |= ks
        self.cur = [0] * len(self.nfs)
        self.xval: dict[int, int] = {}
        self.zval: dict[int, int] = {}
        self.act = [0] * len(self.rhs)

    # Exact state ---------------------------------------------------------------------------------------
    def _val(self, t) -> int:
        return t[0] if isinstance(t, tuple) else self.xval[t]

    def _z(self, z: int) -> int:
        return max(0, max(self._val(a) - self._val(b) for a, b in self.zdef[z]))

    def start(self, where: list[int]) -> None:
        """Set every NF's location number and the rows' activities from scratch."""
        self.cur = list(where)
        self.xval = {v: int(j == self.cur[k]) for k, vids in enumerate(self.xvar) for j, v in enumerate(vids)}
        self.zval = {z: self._z(z) for z in self.zdef}
        act = [0] * len(self.rhs)
        for v, val in (*self.xval.items(), *self.zval.items()):
            if val:
                for r, c in self.inc.get(v, ()):
                    act[r] += c * val
        self.act = act

    def delta(self, k: int, j: int) -> tuple[dict[int, int], dict[int, int]]:
        """Exact row changes of moving NF k to location j, and the indicators' new values."""
        old = self.cur[k]
        d: dict[int, int] = {}
        zs: dict[int, int] = {}
        if old == j:
            return d, zs
        vo, vn = self.xvar[k][old], self.xvar[k][j]
        self.xval[vo], self.xval[vn] = 0, 1
        for v, s in ((vo, -1), (vn, 1)):
            for r, c in self.inc.get(v, ()):
                d[r] = d.get(r, 0) + s * c
        for v in (vo, vn):
            for z in self.deps.get(v, ()):
                if z in zs:
                    continue
                nz = self._z(z)
                zs[z] = nz
                if nz != self.zval[z]:
                    for r, c in self.inc.get(z, ()):
                        d[r] = d.get(r, 0) + (nz - self.zval[z]) * c
        self.xval[vo], self.xval[vn] = 1, 0
        return d, zs

    def apply(self, k: int, j: int, d: dict[int, int], zs: dict[int, int]) -> None:
        old = self.cur[k]
        self.xval[self.xvar[k][old]], self.xval[self.xvar[k][j]] = 0, 1
        self.cur[k] = j
        self.zval.update(zs)
        for r, x in d.items():
            self.act[r] += x

    def feasible(self) -> bool:
        return all(a <= b for a, b in zip(self.act, self.rhs, strict=True))

    def objective(self) -> int:
        return sum(self.cost[k][j] for k, j in enumerate(self.cur))

    # Search ---------------------------------------------------------------------------------------------
    def _matrix(self, ks) -> None:
        for k in ks:
            for j in range(len(self.locs[k])):
                m = self.mbase[k] + j
                self.D[m] = 0
                if j == self.cur[k]:
                    self.D[m] = np.inf
                    self.gain[m] = 0
                    continue
                d, _ = self.delta(k, j)
                for r, x in d.items():
                    self.D[m, r] = x
                self.gain[m] = self.cost[k][self.cur[k]] - self.cost[k][j]

    def run(self, where: list[int], deadline: float) -> bool:
        """Search from `where` until no move improves or `deadline` (process_time); True when the state ends
        feasible (exactly)."""
        self.start(where)
        nm = sum(len(loc) for loc in self.locs)
        self.mbase = np.cumsum([0] + [len(loc) for loc in self.locs])[:-1].tolist()
        self.mnf = np.repeat(np.arange(len(self.nfs)), [len(loc) for loc in self.locs])
        self.D = np.zeros((nm, len(self.rhs)))
        self.gain = np.zeros(nm)
        self._matrix(range(len(self.nfs)))
        rhs = np.array(self.rhs, dtype=float)
        w = 1.0 / np.maximum(np.abs(rhs), 1.0)
        bad: set[tuple[int, int]] = set()

        def do(m: int) -> list[int]:
            k = int(self.mnf[m])
            j = m - self.mbase[k]
            d, zs = self.delta(k, j)
            self.apply(k, j, d, zs)
            return [k, *self.near[k]]

        # Repair: moves that lower the weighted violation most.
        while not self.feasible():
            if time.process_time() > deadline:
                return False
            over = np.maximum(np.array(self.act, dtype=float)[None, :] + self.D - rhs[None, :], 0.0) @ w
            now = float(np.maximum(np.array(self.act, dtype=float) - rhs, 0.0) @ w)
            low = float(over.min())
            if not low < now:
                return False
            near = np.flatnonzero(over <= low + 1e-9 * now)
            m = int(near[np.argmax(self.gain[near])])
            self._matrix(set(do(m)))
        while time.process_time() < deadline:
            slack = rhs - np.array(self.act, dtype=float)
            fits = np.all(slack[None, :] >= self.D, axis=1)
            ok = np.flatnonzero(fits & (self.gain > 0))
            if len(ok):
                use = np.maximum(self.D[ok], 0.0) @ w
                m = int(ok[np.argmax(self.gain[ok] / (use + 1e-12))])
                k = int(self.mnf[m])
                d, zs = self.delta(k, m - self.mbase[k])
                if all(self.act[r] + x <= self.rhs[r] for r, x in d.items() if x > 0):
                    self.apply(k, m - self.mbase[k], d, zs)
                    self._matrix({k, *self.near[k]})
                    continue
                self.D[m] = np.inf  # float screening let through what the integers do not
                continue
            if not self._pair(slack, bad):
                break
        return self.feasible()

    def _pair(self, slack: np.ndarray, bad: set) -> bool:
        """The best pair of moves of two NFs (one gives up gain, the other wins more) that fits together;
        applied (exactly checked) -> True."""
        rel = np.flatnonzero(np.isfinite(self.D).all(axis=1) & (self.gain < 0))
        take = np.flatnonzero(np.isfinite(self.D).all(axis=1) & (self.gain > 0))
        if not len(rel) or not len(take):
            return False
        rows = np.flatnonzero(np.maximum(self.D[take], 0).max(axis=0) > slack)  # rows a take can break
        g = self.gain[rel][:, None] + self.gain[take][None, :]
        ok = g > 0
        ok &= self.mnf[rel][:, None] != self.mnf[take][None, :]
        for r in rows:
            ok &= self.D[rel, r][:, None] + self.D[take, r][None, :] <= slack[r]
        for m1, m2 in bad:
            ia, ib = np.flatnonzero(rel == m1), np.flatnonzero(take == m2)
            if len(ia) and len(ib):
                ok[ia[0], ib[0]] = False
        if not ok.any():
            return False
        g = np.where(ok, g, -np.inf)
        a, b = np.unravel_index(int(np.argmax(g)), g.shape)
        pair = (int(rel[a]), int(take[b]))
        if pair is None:
            return False
        m1, m2 = pair
        saved = (list(self.cur), list(self.act), dict(self.zval))
        k1, k2 = int(self.mnf[m1]), int(self.mnf[m2])
        d, zs = self.delta(k1, m1 - self.mbase[k1])
        self.apply(k1, m1 - self.mbase[k1], d, zs)
        d, zs = self.delta(k2, m2 - self.mbase[k2])
        self.apply(k2, m2 - self.mbase[k2], d, zs)
        if not self.feasible():
            self.cur, self.act, self.zval = saved
            self.xval = {
                v: int(j == self.cur[k]) for k, vids in enumerate(self.xvar) for j, v in enumerate(vids)
            }
            bad.add(pair)
            return True  # try the next best
        self._matrix({k1, k2, *self.near[k1], *self.near[k2]})
        return True

    def hint(self) -> dict[int, int]:
        """Variable index -> value of the current state, after an exact check from scratch (or {})."""
        self.start(self.cur)
        if not self.feasible():
            return {}
        return {**self.xval, **self.zval}


def plain_hint(model, budget: float) -> dict | None:
    """A complete feasible hint for `model`'s stage 1 from the local search (at most `budget` CPU seconds
    of search), as {CP-SAT variable: value}; None when it found no feasible placement."""
    if not model.x or model.ls_rows is None:
        return None
    t = time.process_time()
    ps = PlainSearch(model)
    p = model.p
    where = []
    for i, locs in zip(ps.nfs, ps.locs, strict=True):
        cur = p.nodes[i].location
        where.append(locs.index(cur) if cur in locs else (locs.index("host") if "host" in locs else 0))
    if not ps.run(where, t + budget):
        return None
    h = ps.hint()
    if not h:
        return None
    return {model.ls_vars[v]: val for v, val in h.items()}
