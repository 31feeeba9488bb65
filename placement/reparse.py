"""Incremental parse: a new version of an instance read by re-reading only the nodes and edges that differ.

`Parsed.read(obj)` compares the JSON object with a copy of the last one that parsed: the same top-level
part (sNICs, chains, PCIe model; compared as JSON text, so `true` is not `1`) and as many nodes and edges
give a Problem from the last one with the differing elements re-read (`model.parse_node`,
`parse_edge`, with their own field names in errors); anything else is a full `parse_problem`. The
result is the Problem `parse_problem(obj)` gives (the same values, the same `inexact` entries in the
same order). A node whose id changes, and sNICs with rule budgets (every table's rules are summed
into them), take the full parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from placement.model import RULES, Problem, parse_edge, parse_node, parse_problem, round_onto

_PARTS = ("nodes", "edges")
# A number's field (the end of its inexact entry's name) -> (the Node/Edge attribute, the scale it is on:
# G traffic, R host ratios, Rn sNIC ratios; reprepare.py). Ratios count only for a placed vertex.
_SCALED = {"gbps": ("gbps", "G"), "through_gbps": ("through", "G"), "r_host": ("r_host", "R"),
           "b_host": ("b_host", "R"), "r_nic": ("r_nic", "Rn"), "b_nic": ("b_nic", "Rn")}  # fmt: skip


def _copy_node(n: dict) -> dict:
    """A copy deep enough for a node that parsed (its nested values are objects of numbers)."""
    return {k: (v.copy() if type(v) is dict else v) for k, v in n.items()}


def _risky(n: dict) -> bool:
    """A node with a (nested) value equal to 0 or 1: a JSON true/false in its place compares equal."""
    for v in n.values():
        if type(v) is dict:
            if any(x == 0 or x == 1 for x in v.values() if type(x) is not str):
                return True
        elif type(v) is not str and (v == 0 or v == 1):
            return True
    return False


def _differing(new: list, old: list) -> list[int]:
    """Indices where two lists of equal length differ (==), by halving: slices compare in C, so a few
    changes among thousands cost a few slice comparisons instead of a Python loop over all."""
    out: list[int] = []
    spans = [(0, len(new))]
    while spans:
        lo, hi = spans.pop()
        if new[lo:hi] == old[lo:hi]:
            continue
        if hi - lo <= 16:
            out += [i for i in range(lo, hi) if new[i] != old[i]]
        else:
            mid = (lo + hi) // 2
            spans += [(lo, mid), (mid, hi)]
    return sorted(out)


def _has_bool(n: dict) -> bool:
    """A node with a JSON true/false among its (nested) values: equal to 1/0 under ==, refused by the parse."""
    for v in n.values():
        t = type(v)
        if t is bool or (t is dict and any(type(x) is bool for x in v.values())):
            return True
    return False


def _head(obj: dict) -> str | None:
    try:
        return json.dumps({k: v for k, v in obj.items() if k not in _PARTS}, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError):
        return None


@dataclass
class Read:
    """One read: the Problem and what differs from the previous one (indices), or None when fully read."""

    problem: Problem
    nodes: list[int] | None
    edges: list[int] | None

    @property
    def incremental(self) -> bool:
        return self.nodes is not None


class Parsed:
    """The last instance that parsed, kept to read the next version incrementally."""

    def __init__(self) -> None:
        self.problem: Problem | None = None
        self._head: str | None = None
        self._nodes: list[dict] = []
        self._edges: list[dict] = []
        self._offsets = np.zeros(0, dtype=np.int64)  # per node, then per edge: start in inexact; then end
        self._ids: set[str] = set()
        self._risky: set[int] = set()  # nodes where true/false would compare equal to a value (_risky)
        self._risky_edges: set[int] = set()  # edges whose gbps is 0 or 1 (likewise)
        self.snapped = 0  # values the last `snap` read onto the kept scale

    def read(self, obj: Any) -> Read:
        """The Problem of `obj` (PlacementInputError naming the field when invalid: nothing kept then)."""
        diff = self._diff(obj)
        if diff is None:
            return self._full(obj)
        nodes, edges = diff
        return self._patch(obj, nodes, edges)

    def _diff(self, obj: Any) -> tuple[list[int], list[int]] | None:
        p = self.problem
        if p is None or type(obj) is not dict or any(type(obj.get(k)) is not list for k in _PARTS):
            return None
        if len(obj["nodes"]) != len(self._nodes) or len(obj["edges"]) != len(self._edges):
            return None
        if any(RULES in s.resources for s in p.snics):
            return None
        head = _head(obj)
        if head is None or head != self._head:
            return None
        nodes = _differing(obj["nodes"], self._nodes)
        nn, ee = obj["nodes"], obj["edges"]
        nodes += [i for i in self._risky if type(nn[i]) is dict and _has_bool(nn[i])]  # others differ
        edges = _differing(ee, self._edges)
        edges += [j for j in self._risky_edges if type(ee[j]) is dict and type(ee[j].get("gbps")) is bool]
        return sorted(set(nodes)), sorted(set(edges))

    def _full(self, obj: Any) -> Read:
        offsets: list[int] = []
        problem = parse_problem(obj, offsets)
        self.problem = problem
        self._head = _head(obj)
        self._nodes = [_copy_node(n) for n in obj["nodes"]]
        self._edges = [dict(e) for e in obj["edges"]]
        self._offsets = np.array(offsets, dtype=np.int64)
        self._ids = {n.id for n in problem.nodes}
        self._risky = {i for i, n in enumerate(self._nodes) if _risky(n)}
        self._risky_edges = {j for j, e in enumerate(self._edges) if e["gbps"] in (0, 1)}
        return Read(problem, None, None)

    def _patch(self, obj: dict, nodes: list[int], edges: list[int]) -> Read:
        old = self.problem
        assert old is not None
        locations = set(old.locations)
        declared = set(old.resource_names)
        new_nodes, new_edges = list(old.nodes), list(old.edges)
        entries: dict[int, list] = {}  # element (node k, or edge len(nodes) + j) -> its inexact entries
        for i in nodes:
            got: list = []
            node = parse_node(i, obj["nodes"][i], locations, declared, got)
            if node.id != old.nodes[i].id or RULES in node.needs:
                return self._full(obj)  # ids are what edges and chains name; rules sum into the sNICs
            new_nodes[i] = node
            entries[i] = got
        n_nodes = len(new_nodes)
        for j in edges:
            got = []
            new_edges[j] = parse_edge(j, obj["edges"][j], self._ids, got)
            entries[n_nodes + j] = got
        inexact, offsets = self._inexact(old.inexact, entries)
        problem = Problem(new_nodes, new_edges, old.snics, old.pcie_model, inexact=inexact, chains=old.chains)
        self.problem = problem
        for i in nodes:
            self._nodes[i] = _copy_node(obj["nodes"][i])
            if _risky(self._nodes[i]):
                self._risky.add(i)
            else:
                self._risky.discard(i)
        for j in edges:
            self._edges[j] = dict(obj["edges"][j])
            if self._edges[j]["gbps"] in (0, 1):
                self._risky_edges.add(j)
            else:
                self._risky_edges.discard(j)
        self._offsets = offsets
        return Read(problem, nodes, edges)

    def snap(self, read: Read, scales: dict[str, int]) -> Read | None:
        """`read` (incremental, the last read) with each re-read value that is off its kept scale (`scales`:
        G, R, Rn; its denominator does not divide it) read onto that scale instead (model.round_onto,
        within the documented relative error; its inexact entry says so): `read` itself when none is off,
        None (nothing changed) when one is off and cannot be: an exact input, or one too far from the
        scale's grid. Then the kept instance is the snapped one."""
        p = read.problem
        self.snapped = 0
        if read.nodes is None or read.edges is None or p is not self.problem:
            return None
        n_nodes = len(p.nodes)
        elements = [(i, p.nodes[i]) for i in read.nodes] + [(n_nodes + j, p.edges[j]) for j in read.edges]
        swaps: dict[int, dict] = {}  # element -> {attribute: new value}
        entries: dict[int, tuple] = {}  # position in inexact -> its new entry
        for el, obj in elements:
            fields = {k: v for k, v in _SCALED.items() if hasattr(obj, v[0])}
            if el < n_nodes and not obj.placed:
                fields = {k: v for k, v in fields.items() if v[1] == "G"}
            for key, (attr, scale) in fields.items():
                val = getattr(obj, attr)
                if not val or scales[scale] % val.denominator == 0:
                    continue
                lo, hi = int(self._offsets[el]), int(self._offsets[el + 1])
                name = f"nodes[{el}].{key}" if el < n_nodes else f"edges[{el - n_nodes}].{key}"
                pos = next((k for k in range(lo, hi) if p.inexact[k][0] == name), None)
                got = None if pos is None else round_onto(p.inexact[pos][1], scales[scale])
                if got is None:
                    return None
                swaps.setdefault(el, {})[attr] = got[0]
                entries[pos] = (p.inexact[pos][0], p.inexact[pos][1], got[0], got[1])
        self.snapped = len(entries)
        if not swaps:
            return read
        nodes, edges, inexact = list(p.nodes), list(p.edges), list(p.inexact)
        for el, values in swaps.items():
            if el < n_nodes:
                nodes[el] = replace(nodes[el], **values)
            else:
                edges[el - n_nodes] = replace(edges[el - n_nodes], **values)
        for pos, entry in entries.items():
            inexact[pos] = entry
        self.problem = Problem(nodes, edges, p.snics, p.pcie_model, inexact=inexact, chains=p.chains)
        return Read(self.problem, read.nodes, read.edges)

    def _inexact(self, old: list, entries: dict[int, list]) -> tuple[list, np.ndarray]:
        """The inexact list with the entries of the re-read elements replaced (parse order kept)."""
        if not entries:
            return old, self._offsets
        offs = self._offsets
        out: list = []
        pos = 0
        delta = np.zeros(len(offs), dtype=np.int64)
        for el in sorted(entries):
            out += old[pos : offs[el]]
            out += entries[el]
            pos = int(offs[el + 1])
            delta[el + 1 :] += len(entries[el]) - (pos - int(offs[el]))
        out += old[pos:]
        return out, offs + delta
