"""Meet in the middle over multiple-choice sums (exact int64): every sum of each half of the items, then
the largest total within a room by one sorted search (the local search's fill, swaps.py, and the pooled
fill of pack.py)."""

from __future__ import annotations

import numpy as np


def sums(values: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Every multiple-choice sum of `values` (per item none or one of its values) and its mixed-radix code
    (item k's choice, 0 for none, in the digit of radix prod(len(values[i]) + 1 for i < k)); with one value
    per item the code is the bit mask of the items taken."""
    out, codes, radix = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 1
    for vs in values:
        out = np.concatenate([out] + [out + v for v in vs])
        codes = np.concatenate([codes] + [codes + (j + 1) * radix for j in range(len(vs))])
        radix *= len(vs) + 1
    return out, codes


def decode(values: list[list[int]], code: int) -> list[int]:
    """Per item of `values` the index of the value a code of ``sums`` takes, -1 for none."""
    out = []
    for vs in values:
        out.append(code % (len(vs) + 1) - 1)
        code //= len(vs) + 1
    return out


def best_within(left: np.ndarray, right: np.ndarray, room: int) -> tuple[int, int, int] | None:
    """The largest left[i] + right[j] <= room: (that total, i, j), the first such i; None when no pair fits."""
    order = np.argsort(right, kind="stable")
    rs = right[order]
    k = np.searchsorted(rs, room - left, side="right") - 1
    ok = k >= 0
    total = np.where(ok, left + rs[np.maximum(k, 0)], np.iinfo(np.int64).min)
    best = int(np.argmax(total))
    if not ok[best]:
        return None
    return int(total[best]), best, int(order[k[best]])
