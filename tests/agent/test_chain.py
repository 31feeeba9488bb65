"""A serial service chain in the agent's placement graph (pure, and REST with fakes): declared with PATCH
/v1/nfs/ID once its NFs exist, it is one chain (one edge between neighbours), so the model's PCIe crossings
are the chain's: their number, direction and rate. Bad PATCH bodies change nothing; deleting an NF splices it
out of the chains that name it."""

from __future__ import annotations

import json

import pytest

from domain.model import Nf
from nf_agent import store
from nf_agent.api import create_app
from nf_agent.graph import SnicInfo, build_problem, chain_links
from nf_agent.monitor import Monitor, Sample, Wiring
from placement import parse_problem
from placement.evaluate import evaluate
from placement.profiles import load_profiles
from testkit.fakes import make_agent

G = 1e9 / 8  # bytes per Gbit
SNICS = [SnicInfo("snic0", 36.0, 40.0, 1)]
WIRE = "snic0-eth0"
PATH = ["web", "a", "b", "c", WIRE]  # the bulk traffic's direction: VM -> a -> b -> c -> the wire


def chain_nfs(path: list[str], where: dict[str, str]) -> list[Nf]:
    return [Nf(nf, "firewall", {}, 200 + i, 0.0, src, dst, location=where[nf])
            for i, (nf, src, dst) in enumerate(chain_links(path))]  # fmt: skip


def measured_edges(nfs: list[Nf], gbps: float) -> dict[tuple[str, str], float]:
    """The monitor's edges for one-arm NF ports that each took `gbps` in and sent it on over one second (the
    agent's wiring: a chain end not given is the wire)."""
    chains = {n.id: (n.src or WIRE, n.dst or WIRE) for n in nfs}
    wiring = Wiring({(n.location, f"p-{n.id}"): n.id for n in nfs}, {}, chains)
    m = Monitor()
    zero = {n.location: {} for n in nfs}
    for n in nfs:
        zero[n.location][f"p-{n.id}"] = {"tx_bytes": 0, "rx_bytes": 0}
    m.update(Sample(0.0, zero), wiring)
    one = {sw: {p: {"tx_bytes": gbps * G, "rx_bytes": gbps * G} for p in ports} for sw, ports in zero.items()}
    return m.update(Sample(1.0, one), wiring).edges


def predicted_pcie(nfs: list[Nf], measured: dict) -> dict[str, float]:
    problem = parse_problem(build_problem(SNICS, ["web"], nfs, load_profiles(), measured))
    placement = {n.id: (n.pinned or n.location) for n in problem.nodes}
    return {d: float(x) for d, x in evaluate(problem, placement).pcie["snic0"].items()}


def test_chain_links_names_each_nfs_neighbours():
    assert chain_links(PATH) == [("a", "web", "b"), ("b", "a", "c"), ("c", "b", WIRE)]
    assert chain_links(["web", "a", WIRE]) == [("a", "web", WIRE)]
    with pytest.raises(ValueError, match="at least one NF"):
        chain_links(["web", WIRE])


@pytest.mark.parametrize(
    "where,down,up",
    [
        ({"a": "host", "b": "snic0", "c": "snic0"}, 0.3, 0.0),  # one crossing, host -> sNIC, between a and b
        ({"a": "snic0", "b": "host", "c": "snic0"}, 0.6, 0.3),  # web -> a and b -> c down, a -> b up
        ({"a": "host", "b": "host", "c": "host"}, 0.3, 0.0),  # c -> the wire
        ({"a": "snic0", "b": "snic0", "c": "snic0"}, 0.3, 0.0),  # web -> a
    ],
)
def test_serial_chain_split_host_snic_crosses_pcie_as_the_traffic_does(where, down, up):
    nfs = chain_nfs(PATH, where)
    edges = measured_edges(nfs, 0.3)
    assert edges == {(s, d): pytest.approx(0.3) for s, d in zip(PATH, PATH[1:], strict=False)}  # one chain
    assert predicted_pcie(nfs, edges) == {"down": pytest.approx(down), "up": pytest.approx(up)}


def test_one_chain_per_nf_as_before_mispredicts_the_same_traffic():
    """What the demo declared before (each NF wire -> NF -> web): three parallel chains, so the model has
    the traffic cross PCIe three times, all sNIC -> host (what `make run` showed: predicted down 0, up 3x)."""
    where = {"a": "host", "b": "snic0", "c": "snic0"}
    nfs = [Nf(n, "firewall", {}, 200, 0.0, None, "web", location=where[n]) for n in ("a", "b", "c")]
    edges = measured_edges(nfs, 0.3)
    assert set(edges) == {(WIRE, n) for n in where} | {(n, "web") for n in where}
    assert predicted_pcie(nfs, edges) == {"down": 0.0, "up": pytest.approx(0.9)}  # the chain: down 0.3, up 0


def test_graph_skips_an_edge_to_a_vertex_that_is_gone():
    """A state saved by an agent from before the splice on delete may name a deleted NF: its edge is left out
    (no vertex to place), the rest of the chain stays."""
    nfs = chain_nfs(["web", "a", "ghost"], {"a": "host"})
    p = build_problem(SNICS, ["web"], nfs, load_profiles())
    assert [(e["src"], e["dst"]) for e in p["edges"]] == [("web", "a")]
    parse_problem(p)


# -- PATCH /v1/nfs/ID and DELETE over REST (fakes) ----------------------------------------------------------
@pytest.fixture
def env(tmp_path):
    agent, rt, mp, _ = make_agent(tmp_path)
    c = create_app(agent).test_client()
    assert c.post("/v1/vms", json={"id": "web"}).status_code == 201
    for nf in ("a", "b", "c"):
        r = c.post("/v1/nfs", json={"type": "firewall", "id": nf, "expected": {"gbps": 0.1}})
        assert r.status_code == 201, r.get_json()
    return agent, c


def declare(c, path: list[str]) -> None:
    for nf, src, dst in chain_links(path):
        r = c.patch(f"/v1/nfs/{nf}", json={"expected": {"src": src, "dst": dst}})
        assert r.status_code == 200, r.get_json()


def traffic(c) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in c.get("/v1/placement").get_json()["traffic"]}


def test_patch_declares_the_chain_persists_and_records_it(env):
    agent, c = env
    assert traffic(c) == {(WIRE, n) for n in "abc"} | {(n, WIRE) for n in "abc"}  # the default: the wire
    declare(c, PATH)
    assert traffic(c) == set(zip(PATH, PATH[1:], strict=False))
    r = c.patch("/v1/nfs/b", json={"expected": {"gbps": 2.5}})
    assert r.status_code == 200
    assert r.get_json()["expected"] == {"gbps": 2.5, "src": "a", "dst": "c"}  # the rest stays
    assert r.get_json() == c.get("/v1/nfs/b").get_json()
    edges = {(e["src"], e["dst"]): e["gbps"] for e in c.get("/v1/placement").get_json()["traffic"]}
    assert edges[("a", "b")] == edges[("b", "c")] == 2.5 and edges[("web", "a")] == 0.1
    saved = store.load(agent.state_path)
    assert (saved.nfs["b"].src, saved.nfs["b"].dst, saved.nfs["b"].expected_gbps) == ("a", "c", 2.5)
    updates = [h for h in agent.state.history if h["event"] == "nf-update"]
    assert len(updates) == 4 and updates[-1]["nf"] == "b" and updates[-1]["expected"]["gbps"] == 2.5
    # null goes back to the default vertex (the wire)
    r = c.patch("/v1/nfs/c", json={"expected": {"dst": None}})
    assert r.status_code == 200 and r.get_json()["expected"]["dst"] is None
    assert ("c", WIRE) in traffic(c)


@pytest.mark.parametrize(
    "nf,body,status,field",
    [
        ("a", {"expected": {"dst": "ghost"}}, 400, "expected.dst"),  # no such vertex
        ("a", {"expected": {"src": "a"}}, 400, "expected.src"),  # the NF itself
        ("a", {"expected": {"src": "web", "dst": "a"}}, 400, "expected.dst"),  # valid src, then the NF itself
        ("a", {"expected": {"rate": 1}}, 400, "expected.rate"),  # unknown key
        ("a", {"expected": {"dst": "b"}, "pin": "host"}, 400, "pin"),  # only the expectation changes here
        ("a", {"expected": {}}, 400, "expected"),  # nothing to change
        ("a", {}, 400, "body"),  # none of expected, config, autoscale
        ("a", {"expected": {"gbps": -1, "dst": "b"}}, 400, "expected.gbps"),
        ("a", {"expected": {"gbps": None}}, 400, "expected.gbps"),
        ("a", {"expected": {"dst": "Bad Id"}}, 400, "expected.dst"),
        ("a", {"expected": []}, 400, "expected"),
        ("a", "not json", 400, "body"),
        ("a", None, 400, "body"),
        ("ghost", {"expected": {"dst": "web"}}, 404, None),  # unknown NF, even with a valid body
        ("ghost", {"expected": {"dst": "nowhere"}}, 404, None),  # 404 before 400
    ],
)
def test_bad_patch_is_an_error_naming_the_field_and_changes_nothing(env, nf, body, status, field):
    agent, c = env
    declare(c, PATH)
    before = json.dumps(agent.state.to_json(), sort_keys=True)
    on_disk = agent.state_path.read_text()
    data = b"" if body is None else body if isinstance(body, str) else json.dumps(body)
    r = c.patch(f"/v1/nfs/{nf}", data=data, content_type="application/json")
    assert r.status_code == status, r.get_json()
    assert r.get_json()["error"] and r.get_json().get("field") == field
    assert json.dumps(agent.state.to_json(), sort_keys=True) == before
    assert agent.state_path.read_text() == on_disk


def test_patch_that_cannot_be_saved_is_undone(env, monkeypatch):
    agent, c = env
    declare(c, PATH)
    before = json.dumps(agent.state.to_json(), sort_keys=True)

    def full(*_a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "save", full)
    r = c.patch("/v1/nfs/b", json={"expected": {"gbps": 3, "dst": "web"}})
    assert r.status_code == 500 and "cannot persist" in r.get_json()["error"]
    assert json.dumps(agent.state.to_json(), sort_keys=True) == before


def test_delete_splices_the_nf_out_of_the_chain(env):
    agent, c = env
    declare(c, PATH)
    assert c.delete("/v1/nfs/b").status_code == 200
    assert traffic(c) == {("web", "a"), ("a", "c"), ("c", WIRE)}
    assert store.load(agent.state_path).nfs["a"].dst == "c"
    gone = agent.state.history[-1]
    assert gone["event"] == "nf-delete" and gone["rechained"] == [
        {"nf": "a", "src": "web", "dst": "c"},
        {"nf": "c", "src": "a", "dst": WIRE},
    ]
    # the VM stays in the chain: 409 until the NF naming it is gone; the chain's ends go in any order
    assert c.delete("/v1/vms/web").status_code == 409
    assert c.delete("/v1/nfs/c").status_code == 200
    assert agent.state.nfs["a"].dst == WIRE and traffic(c) == {("web", "a"), ("a", WIRE)}
    assert c.delete("/v1/nfs/a").status_code == 200
    assert c.delete("/v1/vms/web").status_code == 200


def test_delete_of_an_nf_in_a_loop_does_not_point_a_neighbour_at_itself(env):
    agent, c = env
    declare(c, ["web", "a", "b", "a"])  # a -> b -> a (b's dst is a, a's src is b after the second link)
    c.patch("/v1/nfs/a", json={"expected": {"src": "b", "dst": "b"}})
    assert c.delete("/v1/nfs/b").status_code == 200
    a = agent.state.nfs["a"]
    assert (a.src, a.dst) == (None, None)  # spliced to b's neighbours, which were a itself: the default


def test_chain_latency_slo_over_rest_reaches_the_placement_instance(env):
    agent, c = env
    declare(c, PATH)
    r = c.patch("/v1/nfs/b", json={"expected": {"latency_us": 40}})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["expected"] == {"gbps": 0.1, "src": "a", "dst": "c", "latency_us": 40}
    assert store.load(agent.state_path).nfs["b"].latency_us == 40
    c.patch("/v1/nfs/c", json={"expected": {"latency_us": 55.5}})  # the smallest of the chain's holds
    obj = build_problem(SNICS, ["web"], list(agent.state.nfs.values()), load_profiles())
    assert obj["chains"] == [{"id": "chain-a", "vertices": PATH, "latency_us": 40}]
    assert parse_problem(obj).chains[0].latency_us == 40
    for bad in (-1, "fast", 1e7, True):
        r = c.patch("/v1/nfs/b", json={"expected": {"latency_us": bad}})
        assert r.status_code == 400 and r.get_json()["field"] == "expected.latency_us", (bad, r.get_json())
    for nf in "bc":  # null: no SLO
        assert c.patch(f"/v1/nfs/{nf}", json={"expected": {"latency_us": None}}).status_code == 200
    assert "chains" not in build_problem(SNICS, ["web"], list(agent.state.nfs.values()), load_profiles())
