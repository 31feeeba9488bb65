"""Chvatal-Gomory cuts of the plain model's rows from GLOP's optimal basis, exact in integers (issue 25, gomory23).

GLOP solves the LP relaxation of the recorded rows (covers.Rows, the booleans in [0, 1]) and gives only the
basis: each row is written as an equality with one slack, a_i x + sign_i s_i = d_i, where s_i >= 0 is an
integer (the rows have integer coefficients and bounds; sign and bound follow the row's basis status; an
equality row has none); a boolean at its upper bound is complemented (y = 1 - x), so every column is a
non-negative integer. For a fractional basic boolean, its tableau row's multipliers u (u^T B = e_k) are solved
EXACTLY (sparse Gauss-Jordan in Fractions over the rows' integer coefficients; a basic slack's row gets 0).
Then, in integers: the combination u^T (A' y + S s) = u^T d', every coefficient and the right-hand side
floored (the Chvatal-Gomory rule: valid for every non-negative integer point of the system, for ANY rational
u, so validity never rests on the float side), the slacks substituted back (s_i = sign_i (d_i - a_i x)) and
the complements undone: a row sum c x <= rhs over the booleans with integer coefficients that no 0/1 point
meeting the rows violates. Kept if violated at the LP point and its numbers fit CP-SAT's int64 (< 2^50); a
few rounds, each round's cuts added to the LP (rows with integer coefficients and bound too).
(Float multipliers, numpy's B^-1 rounded to rationals, were tried first: their error floored near-integer
basic coefficients down and no cut was violated on foreign draw 11; numpy.linalg beside CP-SAT's threads also
took 0.1 s per 150 x 150 solve.)
snics25: the strong CG cut of the same combination (scg_cut, Letchford-Lodi; STRONG, off: measured) in place
of the floor, and the LP may come with rows added (the cover cuts: _Model.add_root_cuts), which then enter the system like any
row (integer coefficients and bounds, valid for every placement: the rule's premise stands).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from fractions import Fraction
from math import gcd, lcm

from placement.covers import RootLP, Rows

log = logging.getLogger(__name__)

EPS = 1e-6
VIOLATION = 1e-4  # relative to the cut's largest coefficient
COEFF_MAX = 2**50  # CP-SAT's int64 rows: a cut with a larger coefficient or bound is left out
PER_ROUND = 50  # fractional basic booleans tried per round (the most fractional first)
SKIP_AT = 2**20  # a candidate with phi * a above it on a slack row is not tried (gomory_cuts)
STRONG = False  # strong CG cuts (scg_cut, Letchford-Lodi) in place of the plain ones: off (snics25, measured)


def cg_cut(
    rows: list[tuple[list[int], list[int], int | None, int | None]],
    signs: list[int],
    bounds: list[int],
    comp: set[int],
    u: list[Fraction],
) -> tuple[dict[int, int], int]:
    """The Chvatal-Gomory cut of the equality system {a_i x + signs_i s_i = bounds_i} over y (x complemented on
    `comp`) and s, for the multipliers `u` (exact rationals, any value), as (coefficients over x, rhs) meaning
    sum c_j x_j <= rhs; valid for every 0/1 x meeting the rows (a sign 0 row: an equality, no slack)."""
    return _cg_cut_int(_y_rows(rows, bounds, comp), signs, comp, *_integer_multipliers(u))


def scg_cut(
    rows: list[tuple[list[int], list[int], int | None, int | None]],
    signs: list[int],
    bounds: list[int],
    comp: set[int],
    u: list[Fraction],
) -> tuple[dict[int, int], int]:
    """The strong Chvatal-Gomory cut (Letchford and Lodi 2002) of the same combination as cg_cut: for
    sum a_j z_j = b over non-negative integers z (here y and the slacks), f0 = frac(b) > 0 and k >= 1 with
    1/(k+1) <= f0 < 1/k, a column with f_j = frac(a_j) <= f0 gets floor(a_j), one with
    f0 + (p-1)(1-f0)/k < f_j <= f0 + p(1-f0)/k gets floor(a_j) + p/(k+1); sum <= floor(b), times k + 1 in
    integers. Valid for every non-negative integer point of the equality (so for ANY rational u), and at
    least as strong as cg_cut's on them (each coefficient no lower, the rhs the same, scaled); f0 = 0: cg_cut."""
    return _scg_cut_int(_y_rows(rows, bounds, comp), signs, comp, *_integer_multipliers(u))


def _integer_multipliers(u: list[Fraction]) -> tuple[list[int], int]:
    """u as (big, den): integers u_i * den over their least common denominator."""
    dens = [q.denominator for q in u if q]
    den = lcm(*dens) if dens else 1
    return [q.numerator * (den // q.denominator) for q in u], den


def _y_rows(rows, bounds: list[int], comp: set[int]) -> list[tuple[list[int], list[int], int]]:
    """Each row a x (+ slack) = d over y (y = 1 - x on `comp`): (indices, a', d') with a' = -a on comp and
    d' = d - (a's sum over comp), so a x = a' y + d - d' and the slack is sign (d' - a' y)."""
    out = []
    for (idx, coeffs, _, _), d in zip(rows, bounds, strict=True):
        ys, dy = [], d
        for v, c in zip(idx, coeffs, strict=True):
            if v in comp:
                dy -= c
                ys.append(-c)
            else:
                ys.append(c)
        out.append((idx, ys, dy))
    return out


def _combination(yrows: list[tuple[list[int], list[int], int]], big: list[int]) -> tuple[dict[int, int], int]:
    """den * (u^T A') per column of y and den * u^T d', for u = big / den over `_y_rows`' rows."""
    ycoef: dict[int, int] = {}
    rhs = 0
    for (idx, ys, dy), ui in zip(yrows, big, strict=True):
        if not ui:
            continue
        rhs += ui * dy
        for v, c in zip(idx, ys, strict=True):
            ycoef[v] = ycoef.get(v, 0) + ui * c
    return ycoef, rhs


def _rounded_cut(yrows: list[tuple[list[int], list[int], int]], signs: list[int], comp: set[int], big: list[int],
                 ycoef: dict[int, int], out_rhs: int, coef: Callable[[int], int]) -> tuple[dict[int, int], int]:  # fmt: skip
    """The cut coef(den u^T A') y + coef(den u_i sign_i) s_i <= out_rhs (a rounding `coef` of the combination
    `_combination` gave, and its rounded rhs) with the slacks s_i = sign (d' - a' y) substituted and y = 1 - x
    folded back: (coefficients over x, rhs)."""
    cy = {v: coef(c) for v, c in ycoef.items()}
    for (idx, ys, dy), sign, ui in zip(yrows, signs, big, strict=True):
        if not ui or not sign:
            continue  # an equality row's slack is 0
        fs = coef(ui * sign)
        if not fs:
            continue
        k = fs * sign  # fs * s_i with s_i = sign (d' - a' y)
        out_rhs -= k * dy
        for v, c in zip(idx, ys, strict=True):
            cy[v] = cy.get(v, 0) - k * c
    # back to x: c y with y = 1 - x on comp -> c - c x
    cx: dict[int, int] = {}
    for v, c in cy.items():
        if not c:
            continue
        if v in comp:
            out_rhs -= c
            cx[v] = -c
        else:
            cx[v] = c
    return cx, out_rhs


def _cg_cut_int(
    yrows: list[tuple[list[int], list[int], int]], signs: list[int], comp: set[int], big: list[int], den: int
) -> tuple[dict[int, int], int]:
    """cg_cut for u = big / den (integers, den > 0) over `_y_rows`' rows (gomfast23: the complements folded
    into the rows once per basis, not per multiplier; the same integers):
    floor(u^T A') y + floor(u_i sign_i) s_i <= floor(u^T d')."""
    ycoef, rhs = _combination(yrows, big)
    return _rounded_cut(yrows, signs, comp, big, ycoef, rhs // den, lambda n: n // den)


def _scg_cut_int(
    yrows: list[tuple[list[int], list[int], int]], signs: list[int], comp: set[int], big: list[int], den: int
) -> tuple[dict[int, int], int]:
    """scg_cut for u = big / den (integers, den > 0) over `_y_rows`' rows."""
    ycoef, rhs = _combination(yrows, big)
    r0 = rhs % den  # den * f0
    if not r0:  # f0 = 0: the plain cut (as _cg_cut_int, without a second combination)
        return _rounded_cut(yrows, signs, comp, big, ycoef, rhs // den, lambda n: n // den)
    k = -(-den // r0) - 1  # ceil(1 / f0) - 1: 1/(k+1) <= f0 < 1/k
    top, span = k + 1, den - r0

    def coef(n: int) -> int:  # (k + 1) times the strong coefficient of n / den
        q, r = divmod(n, den)
        return top * q + (0 if r <= r0 else -(-k * (r - r0) // span))

    cx, out_rhs = _rounded_cut(yrows, signs, comp, big, ycoef, top * (rhs // den), coef)
    g = gcd(*cx.values()) if cx else 1
    if g > 1:  # c x <= rhs over integers x: (c / g) x <= floor(rhs / g)
        cx = {v: c // g for v, c in cx.items()}
        out_rhs //= g
    return cx, out_rhs


def _exact_solve_int(eqs: list[dict[int, int]], rhs: list[dict[int, int]]):
    """The square sparse system sum_v eqs[e][v] y_v = rhs[e] (integers; rhs as sparse columns), exactly, by
    fraction-free sparse Gauss-Jordan elimination (gomfast23; in Fractions before it, the same pivots): a row
    s is eliminated by the pivot row r as (p / g) s - (f / g) r (p, f: the pivot's coefficients in r and s, g
    their gcd), then divided by the gcd of its entries, so every row stays an integer multiple of the rational
    row Gauss-Jordan would hold (the same non-zeros, the same pivot choice: the shortest equation, its least
    shared unknown). Per unknown v (p, {column: numerator}): y_v = numerator / p in each column; None when
    singular. Mutates its arguments."""
    n = len(eqs)
    occurs: dict[int, set[int]] = {}
    for e, eq in enumerate(eqs):
        for v in eq:
            occurs.setdefault(v, set()).add(e)
    active = set(range(n))
    pivot: dict[int, int] = {}  # row -> its pivot unknown
    while active:
        r = min(active, key=lambda e: len(eqs[e]))
        if not eqs[r]:
            return None
        v = min(eqs[r], key=lambda w: len(occurs[w]))
        row, rr = eqs[r], rhs[r]
        p = row[v]
        for s in list(occurs[v]):
            if s == r:
                continue
            es, rs = eqs[s], rhs[s]
            f = es[v]
            g = gcd(p, f)
            ps, fs = p // g, f // g
            if ps != 1:
                for w in es:
                    es[w] *= ps
                for t in rs:
                    rs[t] *= ps
            for w, c in row.items():
                x = es.get(w, 0) - fs * c
                if x:
                    if w not in es:
                        occurs[w].add(s)
                    es[w] = x
                elif w in es:
                    del es[w]
                    occurs[w].discard(s)
            for t, c in rr.items():
                x = rs.get(t, 0) - fs * c
                if x:
                    rs[t] = x
                else:
                    rs.pop(t, None)
            h = gcd(*es.values(), *rs.values())
            if h > 1:
                for w in es:
                    es[w] //= h
                for t in rs:
                    rs[t] //= h
        active.discard(r)
        pivot[r] = v
    if len(pivot) != n:
        return None
    out = {}
    for r, v in pivot.items():
        p = eqs[r][v]
        out[v] = (p, rhs[r]) if p > 0 else (-p, {t: -c for t, c in rhs[r].items()})
    return out


def gomory_cuts(
    rows: Rows, rounds: int = 4, root: RootLP | None = None, strong: bool | None = None
) -> list[tuple[list[int], list[int], int]]:
    """Chvatal-Gomory cuts (indices, coefficients, rhs: sum <= rhs) at GLOP's LP point of `rows`
    (rows.objective minimised), up to `rounds` rounds; each exact by construction (cg_cut, or scg_cut when
    `strong`, default STRONG). `root`: RootLP(rows) to work on, possibly with rows added already (valid
    rows with integer coefficients and bounds: cover cuts), which then enter the system too."""
    from ortools.linear_solver import pywraplp

    if strong is None:
        strong = STRONG
    cut_int = _scg_cut_int if strong else _cg_cut_int
    if root is None:
        root = RootLP(rows)
    xs, cons, sys_rows = root.xs, root.cons, root.kept
    cuts, seen = [], set()
    for _ in range(rounds):
        if not root.solve():
            break
        val = [x.solution_value() for x in xs]
        m = len(sys_rows)
        vstat = [x.basis_status() for x in xs]
        rstat = [c.basis_status() for c in cons]
        comp = {j for j, s in enumerate(vstat) if s == pywraplp.Solver.AT_UPPER_BOUND}
        signs, bounds = [], []
        for (_, _, lo, hi), s in zip(sys_rows, rstat, strict=True):
            if lo is not None and lo == hi:
                signs.append(0)
                bounds.append(lo)
            elif hi is not None and (s != pywraplp.Solver.AT_LOWER_BOUND or lo is None):
                signs.append(1)  # a x + s = hi
                bounds.append(hi)
            else:
                signs.append(-1)  # a x - s = lo
                bounds.append(lo)
        basic = [("x", j) for j, s in enumerate(vstat) if s == pywraplp.Solver.BASIC]
        basic += [("s", i) for i, s in enumerate(rstat) if s == pywraplp.Solver.BASIC]
        if len(basic) != m:
            log.info("gomory: %d basic columns for %d rows: no cuts", len(basic), m)
            break
        # A basic slack's column is a unit vector: its row's multiplier is 0 (its tableau entry is), so u
        # lives on the rows whose slack is not basic, square against the basic booleans' columns.
        xcols = [j for kind, j in basic if kind == "x"]
        rrows = [i for i, s in enumerate(rstat) if s != pywraplp.Solver.BASIC]
        if len(xcols) != len(rrows):  # pragma: no cover - by the count above
            break
        cand = [(abs(val[j] - round(val[j])), k) for k, j in enumerate(xcols)]
        cand = sorted((t for t in cand if t[0] > EPS), reverse=True)[:PER_ROUND]
        if not cand:
            break
        # u^T B = e_k per candidate k, exactly: B^T u = e_k over the rows' integer coefficients (u then
        # multiplies the unscaled rows; the tableau row is exact, so each cut is the LP vertex's Gomory cut)
        at = {i: r for r, i in enumerate(rrows)}
        eqs: list[dict[int, int]] = [{} for _ in xcols]
        where = {j: k for k, j in enumerate(xcols)}
        for i in rrows:
            idx, coeffs, _, _ = sys_rows[i]
            for v, c in zip(idx, coeffs, strict=True):
                k = where.get(v)
                if k is not None and c:
                    eqs[k][at[i]] = eqs[k].get(at[i], 0) + c
        rhs_cols: list[dict[int, int]] = [{} for _ in xcols]
        for t, (_, k) in enumerate(cand):
            rhs_cols[k][t] = 1
        sol = _exact_solve_int(eqs, rhs_cols)
        if sol is None:
            log.info("gomory: singular basis: no cuts")
            break
        yrows = _y_rows(sys_rows[:m], bounds, comp)
        # u_i = n / p per row (p > 0), as big / den with den the lcm of the reduced denominators: the
        # integers cg_cut forms from the same Fractions; per candidate t its non-zero (row, n, p), reduced
        per_t: list[list[tuple[int, int, int]]] = [[] for _ in cand]
        for r, i in enumerate(rrows):
            p, col = sol[r]
            for t, q in col.items():
                if q:
                    g = gcd(q, p)
                    per_t[t].append((i, q // g, p // g))
        new = 0
        # A candidate whose multiplier has a fractional part phi on the slack of a row with a coefficient a
        # where phi * a > SKIP_AT: that row alone puts ~phi * a into the cut's coefficient of its variable
        # (the slack substituted back), so the cut would fail the VIOLATION test (its violation at the LP
        # vertex is below 2) unless other rows cancel it; not tried. Only which cuts are tried: never one
        # less valid (snics25: identical cuts on the 25 foreign cut-path draws, separation CPU -30 %).
        amax = [max((abs(c) for c in r[1]), default=0) for r in sys_rows[:m]]
        for t in range(len(cand)):
            parts = per_t[t]
            if any(signs[i] and (q * signs[i]) % d * amax[i] > SKIP_AT * d for i, q, d in parts):
                continue
            den = lcm(*(d for _, _, d in parts)) if parts else 1
            big = [0] * m
            for i, q, d in parts:
                big[i] = q * (den // d)
            cx, rhs = cut_int(yrows, signs, comp, big, den)
            if not cx:
                continue
            top_c = max(abs(c) for c in cx.values())
            if top_c > COEFF_MAX or abs(rhs) > COEFF_MAX:
                continue
            act = sum(c * val[v] for v, c in cx.items())
            if act - rhs <= VIOLATION * max(1, top_c):
                continue
            key = (tuple(sorted(cx.items())), rhs)
            if key in seen:
                continue
            seen.add(key)
            idx = sorted(cx)
            coeffs = [cx[v] for v in idx]
            cuts.append((idx, coeffs, rhs))
            root.add_row(idx, coeffs, None, rhs)
            new += 1
        if not new:
            break
    return cuts
