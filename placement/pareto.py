"""Dominance among many configurations of one class (a group, or partial configurations sharing their
open ends), for decompose.py's member-by-member build.

Configuration j dominates k when both are in the same class, j's objective (cost, pcie, moves) is
lexicographically <= k's, every budget use of j is <= k's, and j is strictly better somewhere or equal
everywhere with a smaller index (the rule of decompose._undominated). In an order by (objective, use,
index) - by cost alone when no two of a class tie on it - that is: some j EARLIER in the order with
use_j <= use_k. Small classes compare all such pairs at once (padded to one length); a large one goes
block by block, each block against the undominated configurations before it only.
"""

from __future__ import annotations

import numpy as np

PAIR_CELLS = 1 << 21  # pairs compared at once by _pairwise
BLOCK = 128  # a class more than twice as large is compared block by block against its undominated ones


def _ranks(values: np.ndarray) -> np.ndarray:
    """Dense ranks (equal values, equal ranks) of a 1-d array, from 0."""
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def dominated(cls: np.ndarray, obj: np.ndarray, use: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(N,) mask of the configurations another one of their class dominates.

    `cls` (N,) class ids, `obj` (N, 3) objective columns (cost, pcie, moves), `use` (N, R) budget uses,
    `index` (N,) the tie-break order (distinct within a class).
    """
    n = len(cls)
    if n <= 1:
        return np.zeros(n, dtype=bool)
    # A class-major order in which only an earlier configuration can dominate a later one: by cost,
    # unless two of a class tie on it, then by (cost, pcie, moves, use, index).
    order = np.lexsort([obj[:, 0], cls])
    same = (cls[order][1:] == cls[order][:-1]) & (obj[order, 0][1:] == obj[order, 0][:-1])
    if same.any():
        keys = [index] + [use[:, r] for r in range(use.shape[1] - 1, -1, -1)] + [obj[:, c] for c in (2, 1, 0)]
        order = np.lexsort(keys + [cls])
    return _pairwise(cls, order, use)


def _pairwise(cls: np.ndarray, order: np.ndarray, use: np.ndarray) -> np.ndarray:
    """dominated by comparing the pairs of a class (j before k in `order`, class-major, and use_j <=
    use_k): classes of about one size padded to one length and compared together, each use row as its
    dense ranks (same comparisons, fewer bytes)."""
    n, n_rows = use.shape
    c_sorted = cls[order]
    new = np.ones(n, dtype=bool)
    new[1:] = c_sorted[1:] != c_sorted[:-1]
    c_start = np.nonzero(new)[0]
    sizes = np.diff(np.append(c_start, n))
    dtype = np.int16 if n < 2**15 else np.int32
    u = np.empty((n, n_rows), dtype=dtype)
    for r in range(n_rows):
        u[:, r] = _ranks(use[order, r])
    pad = np.iinfo(dtype).max  # above every rank: padding dominates nothing
    out_sorted = np.zeros(n, dtype=bool)
    by_size = np.argsort(sizes, kind="stable")
    end = len(by_size)
    while end > 0 and sizes[by_size[end - 1]] > 2 * BLOCK:
        c = by_size[end - 1]
        end -= 1
        out_sorted[c_start[c] : c_start[c] + sizes[c]] = _by_blocks(u[c_start[c] : c_start[c] + sizes[c]])
    while end > 0:
        width = int(sizes[by_size[end - 1]])
        if width == 1:
            break  # a class of one: nothing to compare
        step = max(1, PAIR_CELLS // (width * width))
        chunk = by_size[max(0, end - step) : end]
        end -= len(chunk)
        cnt = sizes[chunk]
        row = np.repeat(np.arange(len(chunk)), cnt)
        pos = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        src = np.repeat(c_start[chunk], cnt) + pos
        padded = np.full((len(chunk), width, n_rows), pad, dtype=dtype)
        padded[row, pos] = u[src]
        le = np.broadcast_to(
            np.tri(width, k=-1, dtype=bool), (len(chunk), width, width)
        ).copy()  # [k, j]: j < k
        for r in range(n_rows):
            le &= padded[:, None, :, r] <= padded[:, :, None, r]
        out_sorted[src] = le.any(-1)[row, pos]
    out = np.zeros(n, dtype=bool)
    out[order] = out_sorted
    return out


def _by_blocks(u: np.ndarray) -> np.ndarray:
    """dominated within one large class (`u` its use ranks in the dominance order): each block of
    configurations against the undominated ones before it and the earlier ones of the block. Enough, as
    whatever dominates k is undominated or dominated by an undominated one before it (no cycles)."""
    n, n_rows = u.shape
    cols = np.ascontiguousarray(u.T)  # one row's ranks contiguous
    out = np.zeros(n, dtype=bool)
    kept = np.zeros(0, dtype=np.int64)  # positions of the undominated ones so far
    for a in range(0, n, BLOCK):
        b = min(BLOCK, n - a)
        cand = np.concatenate([kept, np.arange(a, a + b)])
        le = np.ones((b, len(cand)), dtype=bool)
        le[:, len(kept) :] = np.tri(b, k=-1, dtype=bool)  # within the block: j before k only
        tmp = np.empty_like(le)
        for r in range(n_rows):
            np.less_equal(cols[r, cand][None, :], cols[r, a : a + b][:, None], out=tmp)
            le &= tmp
        d = le.any(1)
        out[a : a + b] = d
        kept = np.concatenate([kept, a + np.nonzero(~d)[0]])
    return out
