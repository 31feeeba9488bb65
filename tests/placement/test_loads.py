"""Problem.loads (integers over one common denominator, or Fraction sums past LOADS_DEN_MAX): the exact sums of
each vertex's traffic in and out plus twice a table's through_gbps, as the one-addition-at-a-time rule gives."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from bench.placement.foreign import instance, large_instance
from placement import model
from placement.model import Edge, Node, Problem, Snic, parse_problem


def naive(p: Problem) -> list[Fraction]:
    load = [2 * n.through for n in p.nodes]
    for e in p.edges:
        load[p.index[e.src]] += e.gbps
        load[p.index[e.dst]] += e.gbps
    return load


def drawn(rng: random.Random) -> Problem:
    """Vertices and edges with fractions of assorted denominators (decimal grids, small and large primes)."""

    def frac() -> Fraction:
        den = rng.choice([1, 10, 10**9, 3, 7, 18, 997, 2**61 - 1, rng.randint(1, 10**12)])
        return Fraction(rng.randint(0, 10**6), den)

    n = rng.randint(1, 30)
    kinds = ["nf", "table", "vm", "port"]
    nodes = []
    for i in range(n):
        kind = rng.choice(kinds)
        nodes.append(Node(f"v{i}", kind, through=frac() if kind == "table" else Fraction(0)))
    edges = [Edge(f"v{rng.randrange(n)}", f"v{rng.randrange(n)}", frac()) for _ in range(rng.randint(0, 60))]
    return Problem(nodes, edges, [Snic("s0", Fraction(1), Fraction(1))])


@pytest.mark.parametrize("den_max", [model.LOADS_DEN_MAX, 1, 10**9])
def test_loads_are_the_exact_sums(monkeypatch, den_max):
    monkeypatch.setattr(model, "LOADS_DEN_MAX", den_max)
    rng = random.Random(den_max % 1000)
    for _ in range(300):
        p = drawn(rng)
        got, want = p.loads(), naive(p)
        assert got == want
        assert all(isinstance(x, Fraction) for x in got)
        assert p.host_costs(got) == p.host_costs() and p.nic_costs(got) == p.nic_costs()


def test_loads_on_generated_instances():
    for d in [instance(s) for s in range(60)] + [large_instance(s, 500, 1) for s in range(2)]:
        p = parse_problem(d)
        assert p.loads() == naive(p)
