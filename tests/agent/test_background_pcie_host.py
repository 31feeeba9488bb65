"""PCIe traffic through no NF on a real emulated host (root): VM web streams to the wire through no NF while VM
app streams through fw (pinned to snic0). Both cross the host <-> snic0 link; the model's edges hold only
app's stream, so the agent's background is web's stream (measured independently at web's own interface) and
`GET /v1/placement`'s predicted PCIe (crossings + background) is the link's measured load."""

from __future__ import annotations

import json
import time

from demo.chain import Chain
from emulated_host import naming as nm
from emulated_host.host import ping
from host_datapath.sysutil import run
from nf_agent.client import call
from testkit.agent_host import AGENT_E2E, agent_host, crossings, install_chain, iperf3, wait_pcie
from testkit.poll import wait
from tests.agent.test_scaleout_pcie import ANY_FW, mean

pytestmark = AGENT_E2E


def vm_bytes(host_name: str, slot: int) -> dict[str, int]:
    """Counters of VM `slot`'s interface in its namespace: tx = what the VM sent, rx = what it received."""
    out = run(
        ["ip", "-s", "-j", "link", "show", "dev", nm.if_vm(host_name, slot)[0]],
        netns=nm.ns_vm(host_name, slot),
    )
    stats = json.loads(out)[0]["stats64"]
    return {"tx": stats["tx"]["bytes"], "rx": stats["rx"]["bytes"]}


def vm_rates(host_name: str, slots: dict[str, int]) -> tuple[float, dict[str, dict[str, int]]]:
    return time.monotonic(), {vm: vm_bytes(host_name, slot) for vm, slot in slots.items()}


def test_stream_through_no_nf_is_the_links_background(tmp_path):
    with agent_host(tmp_path, vms=2) as (host, status, _agent, url):
        n = host.name
        slots = {}  # VM id -> its slot (emulated VM namespace), from its virtual port
        for vm in ("web", "app"):
            code, body = call(url, "POST", "/v1/vms", {"id": vm})
            assert code == 201, body
            slots[vm] = body["vport"] - nm.VPORT_VM_BASE
        code, body = call(
            url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw", "config": ANY_FW, "pin": "snic0"}
        )
        assert code == 201, body
        fw_vport = body["vport"]
        assert call(url, "PATCH", "/v1/nfs/fw", {"expected": {"src": "app", "dst": "snic0-eth0"}})[0] == 200
        wire, wire_mac = nm.vport_eth(0, 0), nm.mac(2, 0, 0)
        chains = [
            Chain(nm.vport_vm(slots["web"]), nm.mac(1, 0, slots["web"]), wire, wire_mac, ()),
            Chain(nm.vport_vm(slots["app"]), nm.mac(1, 0, slots["app"]), wire, wire_mac, (fw_vport,)),
        ]
        install_chain(status, chains)
        out_ns, out_ip = nm.ns_outside(n, 0, 0), nm.ip_outside(0, 0)
        for vm in ("web", "app"):
            vm_ns = nm.ns_vm(n, slots[vm])
            assert wait(lambda ns=vm_ns: ping(ns, out_ip, count=2), 30, f"ping {vm} -> wire")
        procs = iperf3(out_ns, nm.ns_vm(n, slots["web"]), out_ip, 5411, "-b", "30M", "-t", "14")
        procs += iperf3(out_ns, nm.ns_vm(n, slots["app"]), out_ip, 5412, "-b", "20M", "-t", "14")
        try:
            views = [wait_pcie(url, "both streams on the PCIe link", min_gbps=0.04)]
            t0, c0 = vm_rates(n, slots)
            for _ in range(4):
                time.sleep(0.6)
                views.append(call(url, "GET", "/v1/placement")[1])
            t1, c1 = vm_rates(n, slots)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
        # each VM's stream, measured at its own interface: down = what it sent, up = what it received
        vms = {vm: {"down": (c1[vm]["tx"] - c0[vm]["tx"]) * 8 / (t1 - t0) / 1e9,
                    "up": (c1[vm]["rx"] - c0[vm]["rx"]) * 8 / (t1 - t0) / 1e9} for vm in slots}  # fmt: skip
        web = vms["web"]
        measured = mean(views, lambda v: v["measured"]["pcie_gbps"]["snic0"])
        predicted = mean(views, lambda v: v["predicted"]["pcie_gbps"]["snic0"])
        background = mean(views, lambda v: v["predicted"]["background_gbps"]["snic0"])
        model = mean(views, lambda v: crossings(v, "snic0"))  # the NFs' crossings alone
        print(f"\nPCIe snic0 Gbit/s, mean of {len(views)} views: measured {measured} predicted {predicted} "
              f"background {background} (the VMs' interfaces: {vms}) crossings {model}")  # fmt: skip
        assert {(e["src"], e["dst"]) for e in views[-1]["traffic"]} == {("app", "fw"), ("fw", "snic0-eth0")}
        # the background is web's stream, which no edge holds (15 % + 1 Mbit/s: the other stream's ACKs,
        # which the model puts down with app's stream, are in it too)
        assert abs(background["down"] - web["down"]) <= 0.15 * web["down"] + 0.001, (background, web)
        # the model's crossings are app's stream only (its ACKs, received by app, counted down with it)
        app = vms["app"]["down"] + vms["app"]["up"]
        assert abs(model["down"] - app) <= 0.15 * app + 0.001, (model, vms)
        for d in ("down", "up"):  # with the background, predicted is the link's load
            assert abs(predicted[d] - measured[d]) <= 0.15 * measured[d] + 0.001, (measured, predicted)
        assert call(url, "DELETE", "/v1/nfs/fw")[0] == 200


def test_background_keeps_an_nf_off_the_link_it_would_overflow(tmp_path):
    """snic0's link is 55 Mbit/s each way (configured and shaped). web streams 30 Mbit/s to the wire through
    no NF; app streams 35 Mbit/s to db through fw on the host. fw on snic0 would add ~36 down to the ~31 of
    background (frames and ACKs): > 55, so the solver keeps fw on the host and a manual move is refused; once
    web's stream stops (background 0) the solver puts fw on snic0 (cheaper; 36 <= 55): without the background
    it would have overflowed the link."""
    with agent_host(tmp_path, vms=3, snics=[{"id": "snic0", "pcie_gbps": 0.055}]) as (
        host,
        status,
        _,
        url,
    ):
        n = host.name
        slots = {}
        for vm in ("web", "app", "db"):
            code, body = call(url, "POST", "/v1/vms", {"id": vm})
            assert code == 201, body
            slots[vm] = body["vport"] - nm.VPORT_VM_BASE
        code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw", "config": ANY_FW,
                                                   "expected": {"src": "app", "dst": "db"},
                                                   "hints": {"prefer": "host"}})  # fmt: skip
        assert code == 201, body
        fw_vport = body["vport"]
        if call(url, "GET", "/v1/nfs/fw")[1]["location"] != "host":
            assert call(url, "POST", "/v1/nfs/fw/migrate", {"to": "host"})[0] == 200
        vm = {k: (nm.vport_vm(s), nm.mac(1, 0, s), nm.ns_vm(n, s), nm.ip_vm(s)) for k, s in slots.items()}
        install_chain(status, [
            Chain(vm["web"][0], vm["web"][1], nm.vport_eth(0, 0), nm.mac(2, 0, 0), ()),
            Chain(vm["app"][0], vm["app"][1], vm["db"][0], vm["db"][1], (fw_vport,)),
        ])  # fmt: skip
        out_ns, out_ip = nm.ns_outside(n, 0, 0), nm.ip_outside(0, 0)
        assert wait(lambda: ping(vm["web"][2], out_ip, count=2), 30, "ping web -> wire")
        assert wait(lambda: ping(vm["app"][2], vm["db"][3], count=2), 30, "ping app -> fw -> db")
        web = iperf3(out_ns, vm["web"][2], out_ip, 5421, "-b", "30M", "-t", "40")
        app = iperf3(vm["db"][2], vm["app"][2], vm["db"][3], 5422, "-b", "35M", "-t", "40")

        def view_when(pred, what: str) -> dict:
            def check():
                v = call(url, "GET", "/v1/placement")[1]
                return v if v["predicted"] and pred(v) else None

            return wait(check, 30, what)

        def fw_edge(v: dict) -> float:
            return {(e["src"], e["dst"]): e["gbps"] for e in v["traffic"]}.get(("app", "fw"), 0.0)

        try:
            v = view_when(
                lambda v: v["predicted"]["background_gbps"]["snic0"]["down"] > 0.027 and fw_edge(v) > 0.033,
                "web's stream as snic0's background and app's through fw",
            )
            code, d = call(url, "POST", "/v1/placement/run", {"force": True})
            print(f"\nwith web's stream: background {v['predicted']['background_gbps']}, fw edge {fw_edge(v)}, "
                  f"solve {d['solve']['placement']['fw']} pcie {d['solve']['pcie_gbps']}")  # fmt: skip
            assert code == 200 and d["solve"]["status"] == "optimal", d
            assert d["solve"]["placement"]["fw"] == "host", d
            code, body = call(url, "POST", "/v1/nfs/fw/migrate", {"to": "snic0"})
            assert code == 409 and "pcie of snic0 (down)" in body["error"], body
            for proc in web:  # web's stream ends: the background goes
                proc.kill()
                proc.wait()
            v = view_when(
                lambda v: v["predicted"]["background_gbps"]["snic0"]["down"] == 0 and fw_edge(v) > 0.03,
                "snic0's background gone, app's stream still through fw",
            )
            code, d = call(url, "POST", "/v1/placement/run", {"force": True})
            print(f"without: background {v['predicted']['background_gbps']}, solve "
                  f"{d['solve']['placement']['fw']} pcie {d['solve']['pcie_gbps']}")  # fmt: skip
            assert code == 200 and d["solve"]["placement"]["fw"] == "snic0", d
        finally:
            for proc in web + app:
                proc.kill()
                proc.wait()
        assert call(url, "DELETE", "/v1/nfs/fw")[0] == 200
