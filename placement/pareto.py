"""Dominance among many configurations of one class (a group, or partial configurations sharing their
open ends), for decompose.py's member-by-member build.

Configuration j dominates k when both are in the same class, j's objective (cost, pcie, moves) is
lexicographically <= k's, every budget use of j is <= k's, and j is strictly better somewhere or equal
everywhere with a smaller index (the rule of decompose._undominated). In an order by (objective, use,
index) - by cost alone when no two of a class tie on it - that is: some j EARLIER in the order with
use_j <= use_k.

That test runs on bit sets, 64 configurations a word: a configuration's bit is its position in its
class's order. For each use row, the configurations of a class sorted by that use give, by running XORs
of their bits (distinct bits: the XOR is their union), the set of those that use no more than k; the AND of
these sets over the rows, and of the positions before k, is empty unless k is dominated. Each row costs a
sort and a few passes over (configurations x words of their class), against a comparison per pair and row.
A class of more than BITS_MAX goes block by block instead, each block against the undominated ones before
it (measured with prefix sums, ~30 times a comparison per element: the bit sets gained nothing on such
widths; rechecked with the XOR accumulate, 2,048 / 4,096: no gain either).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

WORD_CELLS = 1 << 20  # configurations x words of their class handled at once (8 MiB a table)
# A larger class goes block by block against its undominated ones (_by_blocks): its bit sets would cost
# more (measured on long 5,000's classes with prefix sums, ~30 times a comparison per element in numpy;
# 2,048 and 4,096 rechecked with the ~3-8x cheaper XOR accumulate: no gain)
BITS_MAX = 1024
BLOCK = 128  # _by_blocks' block
ELITE = 64  # _by_blocks first tries each block against this many undominated ones of the smallest rank sums
CHECK_BLOCKS = 16  # _by_blocks calls the caller's deadline check every this many blocks
_ONES = np.uint64(2**64 - 1)


def dominated(
    cls: np.ndarray,
    obj: np.ndarray,
    use: np.ndarray,
    index: np.ndarray,
    group: np.ndarray | None = None,
    limit: np.ndarray | None = None,
    check: Callable[[], None] | None = None,
) -> np.ndarray | None:
    """(N,) mask of the configurations another one of their class dominates.

    `cls` (N,) class ids, `obj` (N, 3) objective columns (cost, pcie, moves), `use` (N, R) budget uses,
    `index` (N,) the tie-break order (distinct within a class). With `group` (N,) (each class within one
    group) and `limit` (per group): None when some group keeps more than its limit, as soon as that is
    sure (the caller gives up then: a large class in many rows, where few dominate, took seconds to
    compare only to be given up after - measured, two sNICs). `check` is called now and then in those
    large classes (the caller's deadline: it may raise).
    """
    n = len(cls)
    if n <= 1:
        return None if _over(group, np.ones(n, dtype=bool), limit) else np.zeros(n, dtype=bool)
    # A class-major order in which only an earlier configuration can dominate a later one: by cost,
    # unless two of a class tie on it, then by (cost, pcie, moves, use, index).
    order = _sorted_within(cls, obj[:, 0])
    c_sorted, cost = cls[order], obj[order, 0]
    if ((c_sorted[1:] == c_sorted[:-1]) & (cost[1:] == cost[:-1])).any():
        keys = [index] + [use[:, r] for r in range(use.shape[1] - 1, -1, -1)] + [obj[:, c] for c in (2, 1, 0)]
        order = np.lexsort(keys + [cls])
        c_sorted = cls[order]
    g = None if group is None else group[order]
    got = _dominated_in_order(c_sorted, np.take(use, order, axis=0), g, limit, check)
    if got is None:
        return None
    out = np.zeros(n, dtype=bool)
    out[order] = got
    return out


def _sorted_within(cls: np.ndarray, value: np.ndarray, n_cls: int | None = None) -> np.ndarray:
    """Indices sorting by (cls, value), ties in any order: one sort of a combined int64 key when it fits
    (much cheaper than a two-key lexsort), else the lexsort. `n_cls`: when given, cls are 0 .. n_cls - 1
    (not read again)."""
    c0, c1 = (0, n_cls - 1) if n_cls is not None else (int(cls.min()), int(cls.max()))
    v0 = int(value.min())
    span = int(value.max()) - v0 + 1
    if (c1 - c0 + 1) * span < 2**62:
        return np.argsort((cls - c0 if c0 else cls) * span + (value - v0))
    return np.lexsort((value, cls))


def _dominated_in_order(
    c_sorted: np.ndarray,
    u: np.ndarray,
    g: np.ndarray | None = None,
    limit: np.ndarray | None = None,
    check: Callable[[], None] | None = None,
) -> np.ndarray | None:
    """dominated of configurations in a class-major dominance order (`c_sorted` their classes, `u` their
    uses in that order): classes of one bit-set width (words) handled together, a chunk at a time, then
    the large ones block by block (None: a group keeps more than its `limit`, see dominated)."""
    n, n_rows = u.shape
    new = np.ones(n, dtype=bool)
    new[1:] = c_sorted[1:] != c_sorted[:-1]
    c_start = np.nonzero(new)[0]
    sizes = np.diff(np.append(c_start, n))
    pos = np.arange(n) - np.repeat(c_start, sizes)  # position in its class's order: its bit
    if n_rows == 0:
        return pos > 0  # no use to compare: any earlier one dominates
    out = np.zeros(n, dtype=bool)
    # Bit sets of 1, 2, 4, 8 ... words: a few widths per call (a fixed cost each), at most twice the words
    words = 1 << np.ceil(np.log2((sizes + 63) // 64)).astype(np.int64)
    for w in np.unique(words[(sizes > 1) & (sizes <= BITS_MAX)]).tolist():
        classes = np.nonzero((words == w) & (sizes > 1) & (sizes <= BITS_MAX))[0]
        # consecutive runs of these classes of about WORD_CELLS configurations x words each
        chunk = (np.cumsum(sizes[classes]) - sizes[classes]) // max(1, WORD_CELLS // w)
        for part in np.split(classes, np.nonzero(np.diff(chunk))[0] + 1):
            at = _positions(c_start[part], sizes[part])
            out[at] = _dominated_by_bits(pos[at], sizes[part], np.take(u, at, axis=0), w)
    large = np.nonzero(sizes > BITS_MAX)[0].tolist()
    kept = None
    if g is not None and limit is not None and large:
        small = ~np.repeat(sizes > BITS_MAX, sizes)
        kept = np.bincount(g[small & ~out], minlength=len(limit))  # what the smaller classes keep
    for c in large:
        at = slice(c_start[c], c_start[c] + sizes[c])
        room = None if kept is None else int(limit[g[c_start[c]]] - kept[g[c_start[c]]])
        d = _by_blocks(_ranks(u[at]), room, check)
        if d is None:
            return None
        out[at] = d
        if kept is not None:
            kept[g[c_start[c]]] += int((~d).sum())
    return None if _over(g, ~out, limit) else out


def _over(group: np.ndarray | None, kept: np.ndarray, limit: np.ndarray | None) -> bool:
    """Whether some group keeps (mask `kept`) more than its limit."""
    if group is None or limit is None:
        return False
    return bool((np.bincount(group[kept], minlength=len(limit)) > limit).any())


def _positions(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Indices of the runs starts[i]:starts[i] + sizes[i], concatenated."""
    return np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))


@functools.lru_cache(maxsize=64)
def _below(words: int) -> np.ndarray:
    """(64 x words + 1, words) uint64: row k has the bits 0 .. k-1 set."""
    k = np.arange(64 * words + 1, dtype=np.int64)[:, None] - 64 * np.arange(words, dtype=np.int64)[None, :]
    part = (np.uint64(1) << np.clip(k, 0, 63).astype(np.uint64)) - np.uint64(1)
    table = np.where(k >= 64, _ONES, np.where(k <= 0, np.uint64(0), part)).astype(np.uint64)
    table.setflags(write=False)
    return table


def _dominated_by_bits(pos: np.ndarray, sizes: np.ndarray, u: np.ndarray, words: int) -> np.ndarray:
    """dominated of whole classes (consecutive, `sizes` configurations each, `pos` each one's position in
    its class's order, `u` their uses) of at most 64 x `words` configurations each."""
    m, n_rows = u.shape
    cls = np.repeat(np.arange(len(sizes)), sizes)
    first = np.cumsum(sizes) - sizes
    below = _below(words)
    # A configuration's bit set is a row of `words` contiguous words: the gathers by a sort order copy
    # whole rows and the running XORs run down the columns (measured ~10 % less than the transposed layout,
    # with the cumsum then).
    bit = np.zeros((m, words), dtype=np.uint64)  # each configuration's own bit
    bit[np.arange(m), pos >> 6] = np.uint64(1) << (pos & 63).astype(np.uint64)
    # Rows gathered by np.take (measured 2-15x faster than fancy indexing on these narrow tables).
    hit = np.take(below, pos, axis=0)  # the positions before each one
    # What a class start cancels so that the running sets restart there: the previous class's bits.
    restart = np.take(below, sizes[:-1], axis=0)
    at = np.empty(m, dtype=np.int64)
    for r in range(n_rows):
        p = _sorted_within(cls, u[:, r], len(sizes))  # class blocks stay where they were (cls is sorted)
        v = u[p, r]
        ties_end = np.ones(m, dtype=bool)  # the last of a run of equal uses in a class
        ties_end[:-1] = (v[1:] != v[:-1]) | (cls[1:] != cls[:-1])
        ends = np.nonzero(ties_end)[0]
        at[p] = ends[np.cumsum(ties_end) - ties_end]  # each one's last tie: the set of uses <= its own
        seq = np.take(bit, p, axis=0)
        seq[first[1:]] ^= restart
        # Distinct bits: the running XOR is the set (the union), and XOR-ing the previous class's whole
        # set at a class start cancels it. An XOR accumulate down the columns is ~3-8x faster than the
        # cumsum (the same sets).
        np.bitwise_xor.accumulate(seq, axis=0, out=seq)
        hit &= np.take(seq, at, axis=0)
    return hit.any(1)


def _ranks(u: np.ndarray) -> np.ndarray:
    """(N, R) each use row as its dense ranks (equal values, equal ranks; the same comparisons in fewer
    bytes)."""
    dtype = np.int16 if len(u) < 2**15 else np.int32
    out = np.empty(u.shape, dtype=dtype)
    for r in range(u.shape[1]):
        out[:, r] = np.unique(u[:, r], return_inverse=True)[1].reshape(-1)
    return out


def _by_blocks(
    u: np.ndarray, room: int | None = None, check: Callable[[], None] | None = None
) -> np.ndarray | None:
    """dominated within one large class (`u` its use ranks in the dominance order): each block of
    configurations against the undominated ones before it and the earlier ones of the block. Enough, as
    whatever dominates k is undominated or dominated by an undominated one before it (no cycles). None
    once more than `room` are undominated (they stay so: the rest cannot dominate an earlier one).

    Where most of the class so far is dominated (mostly by a few undominated ones of small uses), a block
    is first compared with the ELITE undominated ones of the smallest rank sums, and only what they leave
    with all the undominated ones (an elite one dominating k is a dominating one: exact either way); on a
    class of 49,578 of which 5,986 are kept, 3x less CPU."""
    n = len(u)
    cols = np.ascontiguousarray(u.T)  # one row's ranks contiguous
    total: np.ndarray | None = None  # rank sums, once the elite filter is first used
    out = np.zeros(n, dtype=bool)
    kept = np.zeros(0, dtype=np.int64)  # positions of the undominated ones so far
    elite: np.ndarray | None = None  # the ELITE of kept of the smallest rank sums (None: not kept up)
    tri = np.tri(BLOCK, k=-1, dtype=bool)  # within a block: j before k only
    for a in range(0, n, BLOCK):
        b = min(BLOCK, n - a)
        block = np.arange(a, a + b)
        if len(kept) > 2 * ELITE and 2 * len(kept) < a:
            if total is None:
                total = cols.sum(0, dtype=np.int64)
            if elite is None:
                elite = kept[np.argpartition(total[kept], ELITE)[:ELITE]]
            hit = _le_all(cols, elite, block).any(1)
            out[block[hit]] = True
            rest = block[~hit]
            if len(rest):
                # the rest against every undominated one and the block's earlier ones (dominated or not)
                earlier = np.arange(a, rest[-1])
                le = _le_all(cols, np.concatenate([kept, earlier]), rest)
                le[:, len(kept) :] &= earlier[None, :] < rest[:, None]
                out[rest] = le.any(1)
        else:
            elite = None
            le = _le_all(cols, np.concatenate([kept, block]), block)
            le[:, len(kept) :] &= tri[:b, :b]
            out[block] = le.any(1)
        new = block[~out[block]]
        if len(new):
            kept = np.concatenate([kept, new])
            if elite is not None:
                pool = np.concatenate([elite, new])
                elite = pool[np.argpartition(total[pool], ELITE)[:ELITE]] if len(pool) > ELITE else pool
        if room is not None and len(kept) > room:
            return None
        if check is not None and (a // BLOCK) % CHECK_BLOCKS == CHECK_BLOCKS - 1:
            check()
    return out


def _le_all(cols: np.ndarray, cand: np.ndarray, at: np.ndarray) -> np.ndarray:
    """(len(at), len(cand)) whether cand's ranks are <= at's in every row."""
    le = np.ones((len(at), len(cand)), dtype=bool)
    tmp = np.empty_like(le)
    for r in range(cols.shape[0]):
        np.less_equal(cols[r, cand][None, :], cols[r, at][:, None], out=tmp)
        le &= tmp
    return le
