"""A scaled-out NF in the agent's placement graph (pure, and REST with fakes): instances at several locations
are one vertex per location (`ID@LOC`, pinned), the NF's edges divided among them in proportion to the
instances (the SELECT group's equal buckets) or by the monitor's measured per-location split, so base cost,
load and PCIe crossings land where the instances run. An NF at one location stays one vertex."""

from __future__ import annotations

import pytest

from domain.errors import ValidationError
from domain.model import Instance, Nf
from nf_agent.api import create_app
from nf_agent.decide import decide
from nf_agent.graph import SnicInfo, build_problem, nf_split, vertex_nf
from nf_agent.monitor import Monitor, Sample, Wiring
from nf_agent.validation import NfRequest, parse_nf, parse_vm
from placement import parse_problem, solve
from placement.evaluate import evaluate
from placement.hysteresis import Dampener
from testkit.fakes import make_agent

G = 1e9 / 8  # bytes per Gbit
SNICS = [SnicInfo("snic0", 36.0, 40.0, 1)]
WIRE = "snic0-eth0"
# base costs per instance, so the instance counts show in the costs
PROFILES = {"firewall": {"r_host": 0.05, "r_nic": 0.1, "b_host": 0.2, "b_nic": 0.5}}


def nf(
    nf_id: str,
    where: list[str],
    gbps: float,
    src: str | None,
    dst: str | None,
    vport: int = 200,
    typ: str = "firewall",
) -> Nf:
    insts = [
        Instance(f"{nf_id}-{k}", loc, loc, 200 + k, f"n{k}", f"i{k}", f"j{k}") for k, loc in enumerate(where)
    ]
    return Nf(nf_id, typ, {}, vport, gbps, src, dst, location=where[0], instances=insts)


def solved(problem_json: dict) -> tuple[dict, dict]:
    """The problem's vertices by id and its evaluation where every vertex is (pinned, else its location)."""
    problem = parse_problem(problem_json)
    ev = evaluate(problem, {n.id: n.pinned or n.location or "host" for n in problem.nodes})
    return {n["id"]: n for n in problem_json["nodes"]}, ev


def edges(problem_json: dict) -> dict[tuple[str, str], float]:
    return {(e["src"], e["dst"]): e["gbps"] for e in problem_json["edges"]}


def pcie(ev) -> dict[str, float]:
    return {d: float(x) for d, x in ev.pcie["snic0"].items()}


def test_wire_nf_vm_each_location_carries_its_share():
    """wire -> fw -> web, fw on host + snic0, 2 Gbit/s: each half crosses PCIe once, sNIC -> host (the host
    half on its way in from the wire, the sNIC half on its way out to the VM): up 2, down 0. The host pays one
    instance's base and 1 + 1 Gbit/s of load, the sNIC likewise (the old model put both on the host)."""
    p = build_problem(SNICS, ["web"], [nf("fw", ["host", "snic0"], 2.0, None, "web")], PROFILES)
    nodes, ev = solved(p)
    assert nodes["fw@host"] == {"id": "fw@host", "kind": "nf", **PROFILES["firewall"], "pinned": "host",
                                "location": "host"}  # fmt: skip
    assert nodes["fw@snic0"]["pinned"] == "snic0" and "fw" not in nodes
    assert edges(p) == {(WIRE, "fw@host"): 1.0, (WIRE, "fw@snic0"): 1.0, ("fw@host", "web"): 1.0,
                        ("fw@snic0", "web"): 1.0}  # fmt: skip
    assert pcie(ev) == {"up": 2.0, "down": 0.0}
    assert float(ev.host_cost) == pytest.approx(0.2 + 0.05 * 2)
    assert float(ev.snic_load["snic0"]) == pytest.approx(0.5 + 0.1 * 2)
    assert not ev.violations


def test_vm_nf_vm_only_the_snic_share_crosses_pcie():
    """web -> fw -> db, fw with instances [host, snic0, snic0], 3 Gbit/s: the SELECT group's equal buckets
    give the host 1/3 and snic0 2/3; only snic0's share crosses, down to it and up again: 2 and 2 (the old
    model, all at fw's first location, host: 0 and 0)."""
    p = build_problem(
        SNICS, ["web", "db"], [nf("fw", ["host", "snic0", "snic0"], 3.0, "web", "db")], PROFILES
    )
    nodes, ev = solved(p)
    assert nodes["fw@snic0"]["instances"] == 2 and "instances" not in nodes["fw@host"]
    assert edges(p) == {("web", "fw@host"): 1.0, ("web", "fw@snic0"): 2.0, ("fw@host", "db"): 1.0,
                        ("fw@snic0", "db"): 2.0}  # fmt: skip
    assert pcie(ev) == {"up": 2.0, "down": 2.0}
    assert float(ev.host_cost) == pytest.approx(0.2 + 0.05 * 2)
    assert float(ev.snic_load["snic0"]) == pytest.approx(0.5 * 2 + 0.1 * 4)


@pytest.mark.parametrize(
    "a_type, a_at, b_at, pairs, down, up",
    [
        # equal bucket counts, both keep the 5-tuple: OVS picks bucket i at both select groups
        ("firewall", ["host", "snic0"], ["host", "snic0"],
         {("a@host", "b@host"): 2.0, ("a@snic0", "b@snic0"): 2.0}, 4.0, 0.0),
        ("firewall", ["host", "snic0"], ["snic0", "host"],
         {("a@host", "b@snic0"): 2.0, ("a@snic0", "b@host"): 2.0}, 6.0, 2.0),
        # a NAT rewrites the flow, so b's group hashes other fields: the product of the shares (1 per pair)
        ("nat", ["host", "snic0"], ["snic0", "host"],
         {("a@host", "b@host"): 1.0, ("a@host", "b@snic0"): 1.0, ("a@snic0", "b@host"): 1.0,
          ("a@snic0", "b@snic0"): 1.0}, 5.0, 1.0),
        # 3 and 2 buckets: the product (a: 1/3 host, 2/3 snic0; b: 1/2 each)
        ("firewall", ["host", "snic0", "snic0"], ["snic0", "host"],
         {("a@host", "b@host"): 0.6667, ("a@host", "b@snic0"): 0.6667, ("a@snic0", "b@host"): 1.3333,
          ("a@snic0", "b@snic0"): 1.3333}, 2.6667 + 0.6667 + 2.0, 1.3333),
    ],
)  # fmt: skip
def test_edge_between_two_split_nfs(a_type, a_at, b_at, pairs, down, up):
    """web -> a -> b -> wire, a and b both split over host and snic0, 4 Gbit/s. PCIe down: web -> a's snic0
    share, a's host share -> b's snic0 share, b's host share -> wire; up: a's snic0 share -> b's host share.
    The edge a -> b is one edge though both declare it."""
    a = nf("a", a_at, 4.0, "web", "b", 200, a_type)
    b = nf("b", b_at, 4.0, "a", WIRE, 201)
    p = build_problem(SNICS, ["web"], [a, b], PROFILES)
    _, ev = solved(p)
    e = edges(p)
    assert {k: v for k, v in e.items() if vertex_nf(k[0]) == "a" and vertex_nf(k[1]) == "b"} == pairs
    assert len(e) == 4 + len(pairs)
    assert pcie(ev) == {"down": pytest.approx(down), "up": pytest.approx(up)}


def test_split_nf_next_to_an_unsplit_one():
    """web -> a (host + snic0) -> c (snic0) -> wire, 2 Gbit/s: a@host's half goes down to c, a@snic0's stays."""
    a = nf("a", ["host", "snic0"], 2.0, "web", "c", 200)
    c = nf("c", ["snic0"], 2.0, "a", WIRE, 201)
    p = build_problem(SNICS, ["web"], [a, c], PROFILES)
    _, ev = solved(p)
    assert edges(p) == {("web", "a@host"): 1.0, ("web", "a@snic0"): 1.0, ("a@host", "c"): 1.0,
                        ("a@snic0", "c"): 1.0, ("c", WIRE): 2.0}  # fmt: skip
    assert pcie(ev) == {"down": 2.0, "up": 0.0}  # web -> a@snic0, a@host -> c


def test_one_location_stays_one_vertex_as_before():
    """Three instances all on snic0: one vertex with the NF's id, 3 instances, not pinned (as before)."""
    p = build_problem(SNICS, ["web"], [nf("fw", ["snic0"] * 3, 2.0, None, "web")], PROFILES, fixed=set())
    nodes, _ = solved(p)
    assert nodes["fw"] == {"id": "fw", "kind": "nf", **PROFILES["firewall"], "instances": 3, "pinned": None,
                           "location": "snic0"}  # fmt: skip
    assert edges(p) == {(WIRE, "fw"): 2.0, ("fw", "web"): 2.0}


def measured_split(ports: dict[str, tuple[float, float]]) -> tuple[dict, dict]:
    """The monitor's edges and per-location split for fw (web -> fw -> db) whose instance port at each
    location took ports[loc] = (in, out) Gbit over one second."""
    wiring = Wiring({(loc, f"p-{loc}"): "fw" for loc in ports}, {}, {"fw": ("web", "db")})
    m = Monitor()
    m.update(Sample(0.0, {loc: {f"p-{loc}": {"tx_bytes": 0, "rx_bytes": 0}} for loc in ports}), wiring)
    one = {loc: {f"p-{loc}": {"tx_bytes": i * G, "rx_bytes": o * G}} for loc, (i, o) in ports.items()}
    got = m.update(Sample(1.0, one), wiring)
    return got.edges, got.nf_split


def test_measured_split_overrides_the_proportional_one():
    """The monitor saw 1 Gbit/s at the host instance and 3 at the sNIC one (in), 1 and 2 (out, the sNIC one
    dropped some): the edges follow the measurement, not the 1:1 of the instance counts."""
    measured, split = measured_split({"host": (1.0, 1.0), "snic0": (3.0, 2.0)})
    assert measured == {("web", "fw"): pytest.approx(4.0), ("fw", "db"): pytest.approx(3.0)}
    assert split == {"fw": {"host": {"in": pytest.approx(1.0), "out": pytest.approx(1.0)},
                            "snic0": {"in": pytest.approx(3.0), "out": pytest.approx(2.0)}}}  # fmt: skip
    fw = nf("fw", ["host", "snic0"], 0.5, "web", "db")
    p = build_problem(SNICS, ["web", "db"], [fw], PROFILES, measured, measured_split=split)
    assert edges(p) == {("web", "fw@host"): 1.0, ("web", "fw@snic0"): 3.0, ("fw@host", "db"): 1.0,
                        ("fw@snic0", "db"): 2.0}  # fmt: skip
    _, ev = solved(p)
    assert pcie(ev) == {"down": 3.0, "up": 2.0}
    assert nf_split(fw, split["fw"]).measured == ("in", "out")
    # a measurement of other locations (taken before a resize) or of no traffic: the proportional split
    for stale in ({"host": {"in": 1.0, "out": 1.0}}, {"host": {"in": 0.0, "out": 0.0}, "snic0": {"in": 0.0}}):
        sp = nf_split(fw, stale)
        assert sp.into == sp.out == {"host": 0.5, "snic0": 0.5} and sp.measured == ()
    p = build_problem(SNICS, ["web", "db"], [fw], PROFILES, measured, measured_split={"fw": {"host": {}}})
    assert edges(p)[("web", "fw@snic0")] == 2.0


def test_split_vertex_names_cannot_be_an_nf_or_vm_id():
    for bad in ("fw@host", "fw@snic0"):
        with pytest.raises(ValidationError):
            parse_vm({"id": bad})
        with pytest.raises(ValidationError):
            parse_nf({"type": "firewall", "id": bad}, ["host", "snic0"])


def test_decide_never_moves_a_split_nf_and_keeps_its_location():
    """The solver sees fw@host / fw@snic0 (pinned) and a free NF x on the host that saves host CPU on the
    sNIC: x moves, fw is in neither the moves nor a changed location."""
    fw = nf("fw", ["host", "snic0"], 2.0, None, "web", 200)
    x = nf("x", ["host"], 2.0, None, "web", 201)
    p = build_problem(SNICS, ["web"], [fw, x], PROFILES)
    d = decide(
        p, {"fw": "host", "x": "host"}, lambda pj: solve(parse_problem(pj), time_limit=5), Dampener(), 0.0
    )
    assert d.go and d.moves == [{"id": "x", "from": "host", "to": "snic0"}], d.why
    assert set(d.result["placement"]) >= {"fw@host", "fw@snic0"}


@pytest.fixture
def scaled(tmp_path):
    """An agent (fakes) with VMs web, db and fw: web -> fw -> db at 3 Gbit/s, scaled out to host + snic0."""
    agent, rt, mp, clock = make_agent(tmp_path)
    c = create_app(agent).test_client()
    for vm in ("web", "db"):
        assert c.post("/v1/vms", json={"id": vm}).status_code == 201
    body = {"type": "firewall", "id": "fw", "expected": {"gbps": 3.0, "src": "web", "dst": "db"}}
    assert c.post("/v1/nfs", json=body).status_code == 201
    if agent.state.nfs["fw"].location != "host":
        assert c.post("/v1/nfs/fw/migrate", json={"to": "host"}).status_code == 200
    r = c.post("/v1/nfs/fw/scale", json={"instances": 2})
    assert r.status_code == 200 and r.get_json()["locations"] == ["host", "snic0"], r.get_json()
    return agent, c


def test_placement_view_shows_the_per_location_costs(scaled):
    agent, c = scaled
    view = c.get("/v1/placement").get_json()
    assert view["locations"] == {"fw": "host"}  # the NF by its id, at its first instance
    pred = view["predicted"]
    assert pred["split"] == {"fw": {"measured": [], "locations": {
        "host": {"instances": 1, "share_in": 0.5, "share_out": 0.5, "load_gbps": 3.0, "host_cores": 0.15},
        "snic0": {"instances": 1, "share_in": 0.5, "share_out": 0.5, "load_gbps": 3.0, "snic_units": 0.3},
    }}}  # fmt: skip
    assert pred["host_cores"] == pytest.approx(0.15) and pred["snic_load"] == {"snic0": pytest.approx(0.3)}
    assert pred["pcie_gbps"]["snic0"] == {"down": 1.5, "up": 1.5}
    assert {(e["src"], e["dst"]) for e in view["traffic"]} == {
        ("web", "fw@host"),
        ("web", "fw@snic0"),
        ("fw@host", "db"),
        ("fw@snic0", "db"),
    }
    # re-placement keeps it where it runs and says nothing about moving it
    r = c.post("/v1/placement/run", json={"force": True})
    assert r.status_code == 200 and r.get_json()["moves"] == [], r.get_json()
    assert [i.location for i in agent.state.nfs["fw"].instances] == ["host", "snic0"]


def test_scale_out_locations_from_the_split_model(tmp_path, scaled):
    """fw at host + snic0 (3 Gbit/s in, 3 out) scaled to 4: each instance's share is r_nic x 6 / 4 = 0.15
    units. With snic0's capacity 0.3, snic0 holds its staying instance (0.15) and one more (0.3), the third
    goes to the host; with 0.2, both go to the host: the same locations as the former hand correction of the
    whole-NF model gave (it took fw's whole cost off its first location, the host, and added 0.15 on snic0)."""
    agent, c = scaled
    agent.cfg.snics = [SnicInfo("snic0", 0.3, 40.0, 1)]
    assert agent.moves.scale_locations(agent.state.nfs["fw"], 4) == ["snic0", "host"]
    agent.cfg.snics = [SnicInfo("snic0", 0.2, 40.0, 1)]  # room for the staying one only
    assert agent.moves.scale_locations(agent.state.nfs["fw"], 4) == ["host", "host"]


def test_new_nf_is_placed_against_the_split_load(tmp_path):
    """An sNIC whose capacity a split NF's sNIC share already fills: a new NF goes to the host (the old model
    put the whole split NF on the host and saw snic0 empty)."""
    agent, rt, mp, clock = make_agent(tmp_path, capacity=0.35)
    agent.create_nf(NfRequest("fw", "firewall", {}, 3.0, None, None, None, "host"))
    if agent.state.nfs["fw"].location != "host":
        agent.migrate_request("fw", "host")
    agent.scale("fw", 2)
    assert [i.location for i in agent.state.nfs["fw"].instances] == ["host", "snic0"]
    new = agent.create_nf(NfRequest("m", "monitor", {}, 1.0, None, None, None, None))
    assert new.location == "host"  # snic0: 0.3 of fw's half + 0.12 of m > 0.35
