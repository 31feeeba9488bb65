"""A scaled-out NF on a real emulated host (root): firewall fw in the chain VM web -> fw -> VM db, scaled to
one instance on the host and one on snic0 (POST /v1/nfs/fw/scale). Under 16 TCP streams (OneSwitch's SELECT
group hashes them over both instances) only the snic0 instance's flows cross PCIe, down to it and up again;
the agent's model, one vertex per location with the monitor's measured split, predicts the link's counters
(the former whole-NF model predicted 0 with fw's first instance on the host)."""

from __future__ import annotations

import subprocess
import time

import pytest

from nf_agent.demo.chain import Chain
from nf_agent.emulated_host import naming as nm
from nf_agent.emulated_host.host import ping
from tests.agent import test_lifecycle as lc
from tests.agent.test_lifecycle import call, install_chain, iperf3, wait, wait_pcie

pytestmark = lc.pytestmark
ANY_FW = {"rules": [{"action": "allow", "proto": "any", "src": "any", "dst": "any"}], "default": "deny"}


@pytest.fixture(scope="module")
def env2(tmp_path_factory):
    with lc.agent_host(tmp_path_factory.mktemp("scaleout"), vms=2) as e:
        yield e


def test_split_nf_predicts_the_pcie_use_measured(env2):
    host, status, agent, url = env2
    n = host.name
    for vm in ("web", "db"):
        assert call(url, "POST", "/v1/vms", {"id": vm})[0] == 201
    code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw", "config": ANY_FW,
                                               "expected": {"src": "web", "dst": "db"}})  # fmt: skip
    assert code == 201, body
    vport = body["vport"]
    if call(url, "GET", "/v1/nfs/fw")[1]["location"] != "host":
        assert call(url, "POST", "/v1/nfs/fw/migrate", {"to": "host"})[0] == 200
    code, body = call(url, "POST", "/v1/nfs/fw/scale", {"instances": 2})
    assert code == 200 and body["locations"] == ["host", "snic0"], body
    procs: list[subprocess.Popen] = []
    try:
        install_chain(
            status, Chain(nm.vport_vm(0), nm.mac(1, 0, 0), nm.vport_vm(1), nm.mac(1, 0, 1), (vport,))
        )
        web_ns, db_ns, db_ip = nm.ns_vm(n, 0), nm.ns_vm(n, 1), nm.ip_vm(1)
        assert wait(lambda: ping(web_ns, db_ip, count=2), 30, "ping web -> fw -> db")
        # 16 TCP flows (the select group hashes TCP ports; -b is per flow): 48 Mbit/s in all
        procs += iperf3(db_ns, web_ns, db_ip, 5402, "-P", "16", "-b", "3M", "-t", "12")
        views = [wait_pcie(url, "the snic0 instance's flows on the PCIe link", min_gbps=0.004)]
        for _ in range(4):  # five views 0.6 s apart: the two switches' counters are read at nearby instants
            time.sleep(0.6)
            views.append(call(url, "GET", "/v1/placement")[1])
        for v in views:
            split = v["measured"]["nf_split_gbps"]["fw"]
            assert set(split) == {"host", "snic0"} and all(r["in"] > 0 for r in split.values()), split
            assert v["predicted"]["split"]["fw"]["measured"] == ["in", "out"], v["predicted"]["split"]
        m = {
            d: sum(v["measured"]["pcie_gbps"]["snic0"][d] for v in views) / len(views) for d in ("down", "up")
        }
        p = {
            d: sum(v["predicted"]["pcie_gbps"]["snic0"][d] for v in views) / len(views)
            for d in ("down", "up")
        }
        # within 15 % of each direction (+ 1 Mbit/s): model and counters come from the same samples
        assert abs(p["down"] - m["down"]) <= 0.15 * m["down"] + 0.001, (m, p, split)
        assert abs(p["up"] - m["up"]) <= 0.15 * m["up"] + 0.001, (m, p, split)
        # what the proportional split (half each) would have predicted from the same samples
        even = {
            d: sum(sum(r[k] for r in v["measured"]["nf_split_gbps"]["fw"].values()) / 2 for v in views)
            / len(views)
            for d, k in (("down", "in"), ("up", "out"))
        }
        print(
            f"\nsplit {split}\nPCIe snic0 Gbit/s, mean of 5 views: measured {m} predicted {p} proportional {even}"
        )
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert call(url, "DELETE", "/v1/nfs/fw")[0] == 200
