"""Chvatal-Gomory cuts of the plain model's rows (placement/gomory.py, solver._Model.add_gomory_cuts): every cut
holds on every 0/1 point of the rows, for ANY multipliers (brute force on small random row systems: fails if a
floor, a slack or a complement is wrong), the exact solve, the cuts at real models' optima and the size gate.
The plain model's full solve through the cut path (both separators) against brute force and the MIP:
tests/placement/test_covers.py."""

from __future__ import annotations

import itertools
import random
import time
from fractions import Fraction
from math import gcd, lcm

import pytest

import placement.solver as solver_mod
from bench.placement.foreign import instance as foreign_instance
from placement import parse_problem
from placement.covers import RootLP, Rows, cover_cuts
from placement.gomory import _exact_solve_int, cg_cut, gomory_cuts, scg_cut
from placement.solver import Options, _Model


def _random_rows(rng, n):
    rows = []
    for _ in range(rng.randint(1, 4)):
        k = rng.randint(1, n)
        idx = rng.sample(range(n), k)
        coeffs = [rng.choice([-7, -3, -2, -1, 1, 1, 2, 3, 5, 11]) for _ in idx]
        s = sum(coeffs)
        kind = rng.choice(["eq", "hi", "lo", "range"])
        mid = rng.randint(min(0, s) - 1, max(0, s) + 1)
        lo, hi = {"eq": (mid, mid), "hi": (None, mid), "lo": (mid, None), "range": (mid - 2, mid + 1)}[kind]
        rows.append((idx, coeffs, lo, hi))
    return rows


def _equality_rows(rng, n):
    """_random_rows with a lower bound, each as an equality at it (no slacks)."""
    return [(idx, coeffs, b, b) for idx, coeffs, b, _ in _random_rows(rng, n) if b is not None]


def _random_u(rng, rows):
    """Multipliers, one exact rational per row (any sign)."""
    return [Fraction(rng.randint(-9, 9), rng.choice([1, 2, 3, 4, 7, 10])) for _ in rows]


def _points(rows, n):
    for bits in itertools.product((0, 1), repeat=n):
        ok = True
        for idx, coeffs, lo, hi in rows:
            a = sum(c * bits[v] for v, c in zip(idx, coeffs, strict=True))
            if (lo is not None and a < lo) or (hi is not None and a > hi):
                ok = False
                break
        if ok:
            yield bits


@pytest.mark.parametrize("cut", [cg_cut, scg_cut])
def test_every_cut_holds_on_every_point_for_any_multipliers(cut):
    """cg_cut, and scg_cut (the strong CG cut of the same combination, snics25), on every 0/1 point."""
    rng = random.Random(25)
    cuts = tight = 0
    for _ in range(1500):
        n = rng.randint(2, 7)
        rows = _random_rows(rng, n)
        pts = list(_points(rows, n))
        if not pts:
            continue
        signs, bounds = [], []
        for _, _, lo, hi in rows:
            if lo is not None and lo == hi:
                signs.append(0)
                bounds.append(lo)
            elif hi is not None and (lo is None or rng.random() < 0.5):
                signs.append(1)
                bounds.append(hi)
            else:
                signs.append(-1)
                bounds.append(lo)
        comp = {v for v in range(n) if rng.random() < 0.4}
        u = _random_u(rng, rows)
        cx, rhs = cut(rows, signs, bounds, comp, u)
        if not cx:
            continue
        cuts += 1
        acts = [sum(c * p[v] for v, c in cx.items()) for p in pts]
        assert max(acts) <= rhs, (rows, signs, comp, u, cx, rhs)
        tight += max(acts) == rhs
    assert cuts > 400 and tight > 150, (cuts, tight)  # the cuts are not vacuous


def test_strong_cut_is_at_least_the_plain_one():
    """On equality rows (no slacks) every variable of the combination is a boolean y >= 0, where the strong CG
    cut (Letchford-Lodi) dominates the plain one of the same multipliers: every 0/1 point (meeting the rows
    or not) that meets scg_cut meets cg_cut; and it is strictly stronger on some (fails if its coefficients,
    its k or its rhs are weakened)."""
    rng = random.Random(11)
    stronger = 0
    for _ in range(1500):
        n = rng.randint(2, 7)
        rows = _equality_rows(rng, n)
        if not rows:
            continue
        signs, bounds = [0] * len(rows), [b for _, _, b, _ in rows]
        comp = {v for v in range(n) if rng.random() < 0.4}
        u = _random_u(rng, rows)
        plain, strong = cg_cut(rows, signs, bounds, comp, u), scg_cut(rows, signs, bounds, comp, u)
        cut_off = 0
        for p in itertools.product((0, 1), repeat=n):
            meets = [sum(c * p[v] for v, c in cx.items()) <= rhs for cx, rhs in (plain, strong)]
            assert meets[0] or not meets[1], (rows, comp, u, plain, strong, p)
            cut_off += meets[0] and not meets[1]
        stronger += cut_off > 0
    assert stronger > 50, stronger


def _textbook_scg(rows, u):
    """Letchford-Lodi's strong CG cut of sum_i u_i (a_i x = b_i), x >= 0, in Fractions as in the paper; scaled
    by k + 1 and divided by the gcd of its coefficients (rhs floored) as scg_cut returns it."""
    a: dict[int, Fraction] = {}
    for (idx, coeffs, _b, _), ui in zip(rows, u, strict=True):
        for v, c in zip(idx, coeffs, strict=True):
            a[v] = a.get(v, Fraction(0)) + ui * c
    b = sum((ui * r[2] for r, ui in zip(rows, u, strict=True)), Fraction(0))
    f0 = b - (b.numerator // b.denominator)
    if not f0:
        return None
    k = 1
    while not (Fraction(1, k + 1) <= f0 < Fraction(1, k)):
        k += 1
    coef = {}
    for v, c in a.items():
        fl = c.numerator // c.denominator
        fj, p = c - fl, 0
        if fj > f0:
            p = next(q for q in range(1, k + 1) if fj <= f0 + q * (1 - f0) / k)
        coef[v] = (k + 1) * fl + p
    rhs = (k + 1) * (b.numerator // b.denominator)
    coef = {v: c for v, c in coef.items() if c}
    g = gcd(*coef.values()) if coef else 1
    return {v: c // g for v, c in coef.items()}, rhs // g


def test_strong_cut_is_the_textbook_one():
    """scg_cut on equality rows (no slacks, no complements) against Letchford-Lodi's formula in Fractions."""
    rng = random.Random(5)
    checked = 0
    for _ in range(1500):
        n = rng.randint(2, 7)
        rows = _equality_rows(rng, n)
        if not rows:
            continue
        u = _random_u(rng, rows)
        want = _textbook_scg(rows, u)
        if want is None:
            continue
        assert scg_cut(rows, [0] * len(rows), [r[2] for r in rows], set(), u) == want, (rows, u)
        checked += 1
    assert checked > 500, checked


@pytest.mark.parametrize("strong", [False, True])
@pytest.mark.parametrize("covers_first", [False, True])
def test_gomory_cuts_hold_on_every_point_of_random_lps(strong, covers_first):
    """Plain and strong CG cuts, from the rows' LP or (covers_first, what _Model.add_root_cuts does) from
    the LP the cover cuts were added to (their rows then in the system)."""
    rng = random.Random(7)
    found = 0
    for _ in range(300):
        n = rng.randint(3, 9)
        rows = Rows(n_vars=n, objective=[(rng.randint(-9, 9), v) for v in range(n)])
        for idx, coeffs, lo, hi in _random_rows(rng, n):
            rows.add(idx, coeffs, lo, hi, budget=lo is None and hi is not None)
        pts = list(_points(rows.rows, n))
        root = None
        if covers_first:
            root = RootLP(rows)
            cover_cuts(rows, root=root)
        cuts = gomory_cuts(rows, root=root, strong=strong)
        if not pts:
            continue
        for idx, coeffs, rhs in cuts:
            found += 1
            assert all(sum(c * p[v] for v, c in zip(idx, coeffs, strict=True)) <= rhs for p in pts)
    assert found > 20


def test_gomory_cut_of_a_tiny_lp():
    # max x0 + x1 + x2 with 2 x0 + 2 x1 + 2 x2 <= 3: the LP sets 1.5 of them; a CG cut removes that point
    rows = Rows(n_vars=3, objective=[(-1, 0), (-1, 1), (-1, 2)])
    rows.add([0, 1, 2], [2, 2, 2], None, 3, budget=True)
    cuts = gomory_cuts(rows)
    assert cuts
    for idx, coeffs, rhs in cuts:
        for p in itertools.product((0, 1), repeat=3):
            if 2 * sum(p) <= 3:
                assert sum(c * p[v] for v, c in zip(idx, coeffs, strict=True)) <= rhs


def _exact_solve(eqs: list[dict[int, Fraction]], rhs: list[dict[int, Fraction]]):
    """The square sparse system sum_v eqs[e][v] y_v = rhs[e] (rhs as sparse columns, rationals), exactly: each
    equation scaled to integers, then gomory._exact_solve_int (the separator's own solve); per unknown v its
    solution column {column: value}, or None when singular."""
    ieqs, irhs = [], []
    for eq, rs in zip(eqs, rhs, strict=True):
        den = lcm(*(Fraction(c).denominator for c in (*eq.values(), *rs.values())))
        ieqs.append({v: int(c * den) for v, c in eq.items()})
        irhs.append({t: int(c * den) for t, c in rs.items()})
    out = _exact_solve_int(ieqs, irhs)
    if out is None:
        return None
    return {v: {t: Fraction(c, p) for t, c in col.items()} for v, (p, col) in out.items()}


def test_exact_solve_matches_a_known_system():
    rng = random.Random(3)
    n = 12
    a = [[Fraction(rng.choice([0, 0, 0, 1, -1, 2, 7, 2**40])) for _ in range(n)] for _ in range(n)]
    for k in range(n):
        a[k][k] += 2**45  # non-singular (diagonally dominant)
    y = [Fraction(rng.randint(-5, 5), rng.randint(1, 9)) for _ in range(n)]
    eqs = [{v: c for v, c in enumerate(row) if c} for row in a]
    rhs = [{0: sum(c * y[v] for v, c in enumerate(row))} for row in a]
    out = _exact_solve(eqs, rhs)
    assert [out[v].get(0, 0) for v in range(n)] == y
    assert (
        _exact_solve([{0: Fraction(1), 1: Fraction(2)}, {0: Fraction(2), 1: Fraction(4)}], [{}, {}]) is None
    )


def _dense_solve(a: list[list[int]], b: list[list[int]]):
    """Reference: dense Gauss-Jordan in Fractions with partial pivoting on the first non-zero; None if singular."""
    n = len(a)
    m = [[Fraction(c) for c in row] + [Fraction(c) for c in rb] for row, rb in zip(a, b, strict=True)]
    for col in range(n):
        piv = next((r for r in range(col, n) if m[r][col]), None)
        if piv is None:
            return None
        m[col], m[piv] = m[piv], m[col]
        p = m[col][col]
        m[col] = [c / p for c in m[col]]
        for r in range(n):
            if r != col and m[r][col]:
                f = m[r][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [row[n:] for row in m]


def test_fraction_free_solve_matches_dense_fractions():
    """gomfast23: _exact_solve_int (integer rows, gcd-reduced) against dense Gauss-Jordan in Fractions on sparse
    random integer systems, singular ones included (a pivot scaled wrong or a gcd not dividing the right-hand
    side gives another solution)."""
    rng = random.Random(23)
    solved = singular = 0
    for _ in range(300):
        n = rng.randint(1, 14)
        k = rng.randint(1, 3)
        a = [[rng.choice([0, 0, 0, 0, 1, -1, 2, -3, 6, 35]) for _ in range(n)] for _ in range(n)]
        if rng.random() < 0.15 and n > 1:
            a[-1] = [2 * c for c in a[0]]  # singular
        b = [[rng.choice([0, 0, 1, -2, 5]) for _ in range(k)] for _ in range(n)]
        want = _dense_solve(a, b)
        eqs = [{v: c for v, c in enumerate(row) if c} for row in a]
        rhs = [{t: c for t, c in enumerate(rb) if c} for rb in b]
        got = _exact_solve_int(eqs, rhs)
        if want is None:
            assert got is None
            singular += 1
            continue
        assert got is not None
        solved += 1
        for v in range(n):
            p, col = got[v]
            assert p > 0
            assert [Fraction(col.get(t, 0), p) for t in range(k)] == want[v]
    assert solved > 100 and singular > 20, (solved, singular)


@pytest.mark.parametrize("strong", [False, True])
def test_cuts_hold_on_the_optimum_of_foreign_draws(strong):
    """Every cut of a real model holds at the model's proven optimal placement (found without cuts; any
    placement meeting the rows would do): from the rows' LP and from the LP with the cover cuts in it."""
    for draw, covers_first in ((1541, False), (1598, False), (1541, True), (1598, True), (3012, True)):
        problem = parse_problem(foreign_instance(draw))
        m = _Model(problem, Options())
        m.minimize(m.stage1)
        rows = m.lp_rows()
        root = None
        if covers_first:
            root = RootLP(rows)
            cover_cuts(rows, root=root)
        cuts = gomory_cuts(rows, root=root, strong=strong)
        assert cuts
        status, _, _ = m.solve(time.monotonic() + 60)
        assert status == "optimal"
        val = {k: m.value(m.m.get_bool_var_from_proto_index(k)) for k in range(rows.n_vars)}
        for idx, coeffs, rhs in cuts:
            assert sum(c * val[v] for v, c in zip(idx, coeffs, strict=True)) <= rhs


def test_no_gomory_cuts_above_the_size_gate(monkeypatch):
    problem = parse_problem(foreign_instance(1541))
    m = _Model(problem, Options())
    m.minimize(m.stage1)
    n_vars = len(m.m.proto.variables)
    monkeypatch.setattr(solver_mod, "GOMORY_MAX_VARS", n_vars - 1)
    assert m.add_gomory_cuts() == 0
    monkeypatch.setattr(solver_mod, "GOMORY_MAX_VARS", n_vars)
    assert m.add_gomory_cuts() > 0


def test_skipped_candidates_would_not_give_a_kept_cut(monkeypatch):
    """gomory.SKIP_AT leaves out candidates whose cut would fail the violation test: the same cuts with the skip
    off (SKIP_AT past any product), on real models from the covers' LP as _Model.add_root_cuts runs it."""
    import placement.gomory as gomory_mod

    for draw in (3012, 1598, 34):
        problem = parse_problem(foreign_instance(draw))
        m = _Model(problem, Options())
        m.minimize(m.stage1)
        rows = m.lp_rows()
        got = []
        for at in (gomory_mod.SKIP_AT, 2**4000):
            monkeypatch.setattr(gomory_mod, "SKIP_AT", at)
            root = RootLP(rows)
            cover_cuts(rows, root=root)
            got.append(gomory_cuts(rows, root=root))
        assert got[0] and got[0] == got[1], draw
