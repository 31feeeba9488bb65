"""Dominance among many configurations without comparing every pair (sorting and running minima).

Configuration j dominates k (the rule of decompose.py) when both are in the same class, j's objective
(cost, pcie, moves) is lexicographically <= k's, every budget use of j is <= k's, and j is strictly better
somewhere or equal everywhere with a smaller index. Ordering all configurations by (objective, use, index)
turns that into: some j EARLIER in that order, of the same class, with use_j <= use_k. One row (the sweep
row) is left to running minima, the other rows are grouped into *tuples* of equal values: j dominates k
when tuple(j) <= tuple(k) row by row and the least sweep value among the earlier members of tuple(j) is
<= k's. Fast when few distinct tuples share a class (chains: the PCIe rows take a few values, the capacity
row many); when they are too many, ``dominated`` compares the pairs of each class.
"""

from __future__ import annotations

import numpy as np

MAX_TUPLES = 64  # distinct tuples in one class: beyond it, pairs of tuples would cost like pairs of rows
MAX_WORK = 64  # (tuple pair, configuration) checks per configuration
PAIR_CELLS = 1 << 21  # pairs compared at once by _pairwise


def _ranks(values: np.ndarray) -> np.ndarray:
    """Dense ranks (equal values, equal ranks) of a 1-d array, from 0."""
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def dominated(cls: np.ndarray, obj: np.ndarray, use: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(N,) mask of the configurations another one of their class dominates.

    `cls` (N,) class ids, `obj` (N, 3) objective columns (cost, pcie, moves), `use` (N, R) budget uses,
    `index` (N,) the tie-break order (distinct within a class). Pairs of configurations are compared
    instead when a class has more than MAX_TUPLES distinct tuples or the tuple checks would exceed
    MAX_WORK per configuration.
    """
    n = len(cls)
    if n <= 1:
        return np.zeros(n, dtype=bool)
    n_rows = use.shape[1]
    # Rank in the (objective, use, index) order: only an earlier configuration can dominate a later one.
    keys = [index] + [use[:, r] for r in range(n_rows - 1, -1, -1)] + [obj[:, c] for c in (2, 1, 0)]
    order = np.lexsort(keys)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    sweep = _ranks(use[:, 0]) if n_rows else np.zeros(n, dtype=np.int64)
    other = use[:, 1:]
    # Tuples: (class, other rows), numbered in lexicographic order (a class's tuples are contiguous).
    t_order = np.lexsort([other[:, r] for r in range(other.shape[1] - 1, -1, -1)] + [cls])
    t_key = np.column_stack([cls[t_order], other[t_order]])
    new = np.ones(n, dtype=bool)
    new[1:] = (t_key[1:] != t_key[:-1]).any(1)
    tid = np.empty(n, dtype=np.int64)
    tid[t_order] = np.cumsum(new) - 1
    t_first = t_order[new]
    t_cls, t_other = cls[t_first], other[t_first]
    n_t = len(t_first)
    c_new = np.ones(n_t, dtype=bool)
    c_new[1:] = t_cls[1:] != t_cls[:-1]
    c_start = np.maximum.accumulate(np.where(c_new, np.arange(n_t), 0))
    c_id = np.cumsum(c_new) - 1
    c_size = np.bincount(c_id)
    if c_size.max() > MAX_TUPLES:
        return _pairwise(cls, rank, use)
    pos_in = np.arange(n_t) - c_start
    size_of = c_size[c_id]
    # Comparable tuple pairs (a, b): same class, a's other rows <= b's (a == b included).
    pa, pb = [], []
    for d in range(-int(c_size.max()) + 1, int(c_size.max())):
        b = np.nonzero((pos_in + d >= 0) & (pos_in + d < size_of))[0]
        a = b + d
        ok = (t_other[a] <= t_other[b]).all(1)
        pa.append(a[ok])
        pb.append(b[ok])
    pa, pb = np.concatenate(pa), np.concatenate(pb)
    # Members sorted by (tuple, rank): a running minimum of the sweep rank that restarts at every tuple
    # (each tuple offset below every earlier one by n, the ranks being < n).
    skey = tid * n + rank
    o2 = np.argsort(skey, kind="stable")
    skey, t_sorted = skey[o2], tid[o2]
    run_min = np.minimum.accumulate(sweep[o2] - t_sorted * n) + t_sorted * n
    seg_start = np.searchsorted(t_sorted, np.arange(n_t))
    seg_size = np.bincount(tid, minlength=n_t)
    cnt = seg_size[pb]
    total = int(cnt.sum())
    if total > MAX_WORK * n:
        return _pairwise(cls, rank, use)
    rep = np.repeat(np.arange(len(pb)), cnt)
    offs = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    k = o2[seg_start[pb][rep] + offs]
    a = pa[rep]
    q = np.searchsorted(skey, a * n + rank[k]) - 1  # the last member of tuple a before k
    hit = (q >= seg_start[a]) & (run_min[np.maximum(q, 0)] <= sweep[k])
    out = np.zeros(n, dtype=bool)
    out[k[hit]] = True
    return out


def _pairwise(cls: np.ndarray, rank: np.ndarray, use: np.ndarray) -> np.ndarray:
    """dominated by comparing every pair of a class (j earlier in `rank` and use_j <= use_k), the
    classes padded to one length and compared a chunk of classes at a time."""
    n = len(cls)
    order = np.lexsort([rank, cls])
    c_sorted = cls[order]
    new = np.ones(n, dtype=bool)
    new[1:] = c_sorted[1:] != c_sorted[:-1]
    c_id = np.cumsum(new) - 1
    c_start = np.nonzero(new)[0]
    pos = np.arange(n) - c_start[c_id]
    width = int(pos.max()) + 1
    n_cls = len(c_start)
    big = np.iinfo(np.int64).max
    padded = np.full((n_cls, width, use.shape[1]), big, dtype=np.int64)  # padding dominates nothing
    padded[c_id, pos] = use[order]
    earlier = np.arange(width)[None, :] < np.arange(width)[:, None]  # [k, j]: j before k
    out_sorted = np.zeros((n_cls, width), dtype=bool)
    step = max(1, PAIR_CELLS // (width * width))
    for a in range(0, n_cls, step):
        u = padded[a : a + step]
        le = np.broadcast_to(earlier, (len(u), width, width)).copy()
        for r in range(use.shape[1]):
            le &= u[:, None, :, r] <= u[:, :, None, r]
        out_sorted[a : a + step] = le.any(-1)
    out = np.zeros(n, dtype=bool)
    out[order] = out_sorted[c_id, pos]
    return out
