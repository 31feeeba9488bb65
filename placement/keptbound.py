"""A lower bound on the configurations dominance keeps in one group, without building the group.

prepare (decompose.py) gives up on an instance as soon as one group keeps more than its limit; building the
groups before that one can take seconds (several sNICs: dominance drops few configurations). This bound lets
it give up before building anything, and only where the build would give up too (exact, no clock).

Why it holds, for a group without a latency SLO through it and without move costs: write H for the members a
configuration puts on the host, h(H) its host cost, c(H) their sNIC capacity coefficients (the same in every
sNIC's capacity row). A configuration A dominates B only if cost(A) <= cost(B), i.e. h(H_A) <= h(H_B), and A
uses no more of any sNIC's capacity, so in total c(all) - c(H_A) <= c(all) - c(H_B), i.e. c(H_A) >= c(H_B).
Take a host set H on the strict Pareto front of (min h, max c) over all subsets (no other subset has h <= h(H)
and c >= c(H)): a configuration with host set H is dominated only by one with the same host set, hence the
same total sNIC use, hence (no more on each sNIC) the same use on every sNIC. So each distinct vector of
per-sNIC capacity use over the front's host sets is the use of at least one kept configuration.

With one sNIC the front is small next to what the PCIe rows keep; the same argument on the partial
configurations the build compares after each member (one_snic_exceeds) reads its own earlier limit.
"""

from __future__ import annotations

import numpy as np

FRONT_MAX = 1 << 14  # Pareto points followed at once; past it no bound (0): a cap on the bound's own cost
# Host sets whose sNIC uses are counted (most members on sNICs first; each count is a few numpy calls per
# member): the first ones count (sNICs)^(members on sNICs) each, the later ones little.
COUNTED_MAX = 256


def kept_exceeds(host: np.ndarray, cap: np.ndarray, n_snics: int, limit: int) -> bool:
    """Whether dominance surely keeps more than `limit` configurations of a group whose members have host
    costs `host` and sNIC capacity coefficients `cap` (the same on each of `n_snics` sNICs), every member
    allowed on the host and on every sNIC (no SLO, no move cost: see the module's docstring)."""
    if (n_snics + 1) ** len(host) <= limit:
        return False
    front = _strict_front(host, cap)
    if front is None:
        return False
    if n_snics == 1:
        return len(front) > limit  # one use per host set
    count = 0
    # Host sets with the most members on sNICs first: they count the most vectors.
    for mask in sorted(front, key=lambda x: bin(x).count("1"))[:COUNTED_MAX]:
        on_nic = [int(cap[i]) for i in range(len(host)) if not (mask >> i) & 1]
        count += _distinct_uses(on_nic, n_snics, limit - count + 1)
        if count > limit:
            return True
    return False


def _strict_front(host: np.ndarray, cap: np.ndarray) -> list[int] | None:
    """The host sets (bit masks over the members) on the strict Pareto front of (min host cost, max
    capacity coefficient sum) among all subsets; None past FRONT_MAX points on the way."""
    state = None
    for state in _fronts(host, cap):
        if state is None:
            return None
    mask, tied = state if state is not None else (np.zeros(1, dtype=np.int64), np.zeros(1, dtype=bool))
    return mask[~tied].tolist()


def _fronts(host: np.ndarray, cap: np.ndarray):
    """Per member added in turn: (masks, tied) of the Pareto front of (min host cost, max capacity sum)
    over the subsets of the members so far (tied: another subset reaches the same point, so not strict),
    then None and no more past FRONT_MAX points."""
    h = np.zeros(1, dtype=np.int64)
    c = np.zeros(1, dtype=np.int64)
    mask = np.zeros(1, dtype=np.int64)
    tied = np.zeros(1, dtype=bool)
    for i in range(len(host)):
        h = np.concatenate([h, h + int(host[i])])
        c = np.concatenate([c, c + int(cap[i])])
        mask = np.concatenate([mask, mask | (1 << i)])
        tied = np.concatenate([tied, tied])
        order = np.lexsort((-c, h))  # host cost up, then capacity down
        h, c, mask, tied = h[order], c[order], mask[order], tied[order]
        # A point another one before it weakly dominates is dropped (and so are its extensions: the same
        # members added to the dominating subset weakly dominate them); an equal one marks it tied.
        best = np.maximum.accumulate(c)
        keep = np.ones(len(c), dtype=bool)
        keep[1:] = c[1:] > best[:-1]
        same = np.zeros(len(c), dtype=bool)
        same[:-1] = (h[1:] == h[:-1]) & (c[1:] == c[:-1])
        tied = tied | same
        h, c, mask, tied = h[keep], c[keep], mask[keep], tied[keep]
        if len(h) > FRONT_MAX:
            yield None
            return
        yield mask, tied


def one_snic_exceeds(
    host: np.ndarray, cap: np.ndarray, last: np.ndarray, first: int, partial_limit: int, kept_limit: int
) -> bool:
    """one_snic_bound's first answer."""
    return one_snic_bound(host, cap, last, first, partial_limit, kept_limit)[0]


def one_snic_bound(
    host: np.ndarray, cap: np.ndarray, last: np.ndarray, first: int, partial_limit: int, kept_limit: int
) -> tuple[bool, float]:
    """One sNIC: (whether building a group member by member (decompose._configs_by_member, members in
    column order, host costs `host`, capacity coefficients `cap`, `last` per member its latest neighbour
    in the group or -1) surely keeps more than `partial_limit` partial configurations after placing some
    member j, first <= j < m - 1, where it compares them, or more than `kept_limit` configurations in the
    end (no SLO, no move cost: see the module's docstring).

    After member j the build compares partial configurations only within a class (the locations of the
    frontier F_j: members <= j with a neighbour after j); in each class the other placed members R_j form
    a host set, and the module's argument on R_j's subsets (the frontier's members add the same cost and
    use to all) keeps one per point of R_j's strict front, never dropped before (what dominates it then
    extends to a subset with the same frontier that weakly dominates it). So the build keeps at least
    2^|F_j| x (R_j's strict front) of them. R_j grows by the members' retire times max(c, last[c]), so
    one pass of the front over the members in that order reads every stage's count, and last the whole
    group's (kept_exceeds' count with one sNIC)), and the largest share of its limit a stage's bound reached
    (up to the first stage past it; 0 past FRONT_MAX: no bound)."""
    m = len(host)
    retire = np.maximum(np.arange(m), last)
    order = np.argsort(retire, kind="stable")
    share = 0.0
    # Per R_j, the count is largest at its last stage, before the next member retires (F_j only grows).
    stage = min(int(retire[order[0]]) - 1, m - 2)  # no member retired yet: each location its own class
    if stage >= first:
        if 1 << (stage + 1) > partial_limit:
            return True, (1 << (stage + 1)) / partial_limit
        share = (1 << (stage + 1)) / partial_limit
    fronts = _fronts(host[order], cap[order])
    for k in range(m):
        state = next(fronts)
        if state is None:
            return False, 0.0  # past FRONT_MAX: no bound
        strict = int((~state[1]).sum())
        if k + 1 == m:
            return strict > kept_limit, max(share, strict / kept_limit)
        if int(retire[order[k + 1]]) == int(retire[order[k]]):
            continue  # this stage's R_j is not complete yet
        stage = min(int(retire[order[k + 1]]) - 1, m - 2)
        if stage >= first:  # |F| = (stage + 1) - (k + 1)
            share = max(share, (strict << (stage - k)) / partial_limit)
            if strict << (stage - k) > partial_limit:
                return True, share
    return False, share


def _distinct_uses(on_nic: list[int], n_snics: int, enough: int) -> int:
    """How many distinct per-sNIC capacity uses the placements of members with coefficients `on_nic` on
    `n_snics` sNICs give, counted up to `enough` (the total is the same for all: the last sNIC's use follows
    from the others', so n_snics - 1 coordinates are compared)."""
    if n_snics == 1 or not on_nic:
        return 1
    uses = np.zeros((1, n_snics - 1), dtype=np.int64)
    for v in on_nic:
        moved = [uses]  # the member on the last sNIC: the compared coordinates unchanged
        for k in range(n_snics - 1):
            u = uses.copy()
            u[:, k] += v
            moved.append(u)
        uses = np.unique(np.concatenate(moved), axis=0)
        if len(uses) >= enough:
            return len(uses)
    return len(uses)
