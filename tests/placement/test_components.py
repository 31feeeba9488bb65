"""decompose._components (vectorised connected components of the movable NFs) against a union-find."""

from __future__ import annotations

import numpy as np
import pytest

from placement.decompose import _components


def _union_find(
    n: int, a: np.ndarray, b: np.ndarray, is_mov: np.ndarray, movable: list[int]
) -> list[list[int]]:
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        if is_mov[x] and is_mov[y]:
            parent[find(x)] = find(y)
    comps: dict[int, list[int]] = {}
    for i in movable:
        comps.setdefault(find(i), []).append(i)
    return sorted(comps.values(), key=lambda c: c[0])


@pytest.mark.parametrize("seed", range(4))
def test_components_match_union_find(seed):
    rng = np.random.default_rng(seed)
    for trial in range(150):
        n = int(rng.integers(1, 400))
        if trial % 3 == 0:  # a path listed in random order (the slow case of plain label propagation)
            p = rng.permutation(n)
            a, b = p[:-1], p[1:]
        else:
            m = int(rng.integers(0, 2 * n))
            a, b = rng.integers(0, n, m), rng.integers(0, n, m)
        is_mov = rng.random(n) < rng.choice([0.5, 0.9, 1.0])  # a link with a fixed end joins nothing
        movable = np.nonzero(is_mov)[0].tolist()
        assert _components(movable, a, b, is_mov) == _union_find(n, a, b, is_mov, movable)


def test_long_path_in_random_order_is_one_component():
    n = 20000
    p = np.random.default_rng(7).permutation(n)
    assert _components(list(range(n)), p[:-1], p[1:], np.ones(n, dtype=bool)) == [list(range(n))]
