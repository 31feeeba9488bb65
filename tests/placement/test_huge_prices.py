"""Budget-row prices too large for the exact Lagrangian bound's integers (engine._integer_prices).

A third generator's 8-vertex instance (tests/placement/data/third-max-moves-overflow.json: bandwidths near
1.5e9, a move budget that folds the host cost with a weight near 1e10) gave prices whose integers overflowed
int64 even at den = 1: the solve crashed with OverflowError. The multipliers are now scaled down there (any
l >= 0 gives a valid bound)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from placement import parse_problem, solve
from placement.engine import _integer_prices

DATA = Path(__file__).parent / "data" / "third-max-moves-overflow.json"


def test_the_instance_solves_like_the_mip():
    problem = json.loads(DATA.read_text())
    ours = solve(parse_problem(problem), max_moves=1, time_limit=20)
    mip = solve(parse_problem(problem), solver="mip", max_moves=1, time_limit=20)
    assert ours["status"] == mip["status"] == "infeasible"
    assert "max_moves=1" in ours["reason"]


class _Groups:
    def __init__(self, use: np.ndarray):
        self.use = use
        self.budget = [0] * use.shape[1]


def test_integer_prices_fit_at_any_magnitude():
    rng = np.random.default_rng(0)
    for _ in range(200):
        cols = int(rng.integers(1, 6))
        use = rng.integers(0, 2 ** int(rng.integers(1, 40)), size=(30, cols), dtype=np.int64)
        obj = rng.integers(0, 2 ** int(rng.integers(1, 60)), size=30, dtype=np.int64)
        lam = rng.random(cols) * 10.0 ** float(rng.uniform(-3, 22))
        lam[rng.random(cols) < 0.3] = 0.0
        den, ell = _integer_prices(_Groups(use), obj, lam, [], np.zeros(0))
        assert den >= 1 and all(isinstance(x, int) and x >= 0 for x in ell)
        worst = den * int(np.abs(obj).max()) + sum(
            x * int(np.abs(use[:, r]).max()) for r, x in enumerate(ell)
        )
        assert worst < 2**63  # one configuration's bracket in _bound fits numpy's int64
