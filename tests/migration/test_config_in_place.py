"""Config in place for every NF type but the firewall (tests/migration/test_live_update.py has it), with real NFs
and kernel TCP (root; real OneSwitch, Redis, `nf` processes, connections between namespaces through the
emulated host), through the agent's REST API (`PATCH /v1/nfs/ID {"config"}`, its Flask app in-process). The NAT
and the monitor also on snic0: the host reaches that instance only through the sNIC agent's API
(`PUT /v1/instances/ID/config`), which relays the config to the NF.

Per type, while a VM's TCP connections run through the NF: a bad config is 400 naming the field and changes
nothing (same instance, same pid, same config); the new config is applied in place (`config_applied`
"in-place", same pid, the NF's `reconfigured` counter 1, its own counters not reset); no connection breaks or
stalls. The monitor's change of counters mode passes `nf --check-config` but is refused by the running NF:
also 400, nothing changed. The IPsec chain is two gateways (VM <-> A <-> B <-> wire) tunnelling to each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from emulated_host import naming as nm
from nf_agent.api import create_app
from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS
from testkit.tcp_chain import NAT, End, TcpChain, add_chains, run
from testkit.testbed import IPS_CONFIG, Testbed, nf_counters

pytestmark = LIVE_MARKS
PORT = 5600  # testkit.tcp_chain.run's
VIP = "10.99.0.100"
K1, K2 = "000102030405060708090a0b0c0d0e0f", "0f0e0d0c0b0a09080706050403020100"
TUN_A, TUN_B = "203.0.113.1", "203.0.113.2"


def _sa(
    name: str, direction: str, spi: int, key: str, src: str, dst: str, sel_src: str, sel_dst: str
) -> dict:
    return {"name": name, "dir": direction, "spi": spi, "key": key, "salt": "01020304", "tunnel_src": src,
            "tunnel_dst": dst, "selectors": [{"src": f"{sel_src}/32", "dst": f"{sel_dst}/32"}]}  # fmt: skip


def _ipsec(side: str) -> dict:
    """Gateway A (VM side) or B (wire side) of one tunnel: A's outbound SA is B's inbound one and back."""
    vm, end = nm.ip_vm(0), nm.ip_outside(0, 0)
    if side == "a":
        sas = [
            _sa("to-b", "out", 4097, K1, TUN_A, TUN_B, vm, end),
            _sa("from-b", "in", 8193, K2, TUN_B, TUN_A, end, vm),
        ]
    else:
        sas = [
            _sa("from-a", "in", 4097, K1, TUN_A, TUN_B, vm, end),
            _sa("to-a", "out", 8193, K2, TUN_B, TUN_A, end, vm),
        ]
    return {"sas": sas, "replay_window": 128}


@dataclass(frozen=True)
class Case:
    nf_type: str
    config: dict
    new: dict  # taken in place
    bad: dict
    field: str  # the 400's field for `bad`
    counter: str  # an NF counter the traffic moved (kept, not reset, by the change); a map: its sum
    target: str | None = None  # the address the VM connects to (the LB's VIP)
    nat: bool = False


def _lb(backends: list[str]) -> dict:
    return {"vip": VIP, "port": PORT, "backends": backends}


def _cases() -> list[Case]:
    end = f"{nm.ip_outside(0, 0)}:{PORT}"
    a = _ipsec("a")
    added = {
        **a,
        "sas": [*a["sas"], _sa("to-c", "out", 4099, K1, TUN_A, "203.0.113.3", "10.9.9.9", "10.9.9.8")],
    }
    return [
        Case("nat", NAT, {**NAT, "ports": "20000-30999", "timeouts": {"tcp_established_ms": 7_200_000}},
             {**NAT, "ports": "9-1"}, "config.ports", "translated_out", nat=True),
        Case("lb", _lb([end]), {**_lb([end, "10.99.0.7:5600"]), "timeouts": {"tcp_closed_ms": 5000}},
             _lb([end, end]), "config.backends[1]", "to_backend", target=VIP),
        Case("ips", IPS_CONFIG, {**IPS_CONFIG, "signatures": [*IPS_CONFIG["signatures"],
                                                              {"id": 2, "msg": "y", "content": "OTHER-EVIL"}]},
             {**IPS_CONFIG, "signatures": []}, "config.signatures", "scanned_bytes"),
        Case("l7fw", {"default": "allow", "unparsed": "allow"},
             {"default": "allow", "unparsed": "allow", "block": [{"proto": "http", "host": "evil.example"}]},
             {"default": "allow", "block": [{"proto": "gopher"}]}, "config.block[0].proto", "classified"),
        Case("monitor", {}, {"idle_timeout_ms": 60_000}, {"counters": "increments"}, "config", "new_flows"),
        Case("ipsec", a, {**added, "sas": [{**added["sas"][0], "name": "renamed"}, *added["sas"][1:]]},
             {**a, "replay_window": 100}, "config.replay_window", "encapsulated"),
    ]  # fmt: skip


def _count(stats: dict, name: str) -> int:
    v = stats[name]
    return sum(v.values()) if isinstance(v, dict) else v


def _pid(tb: Testbed, inst) -> int | None:
    """The instance's NF process as where it runs knows it (an sNIC's: its agent's view)."""
    if inst.location == "host":
        return inst.pid
    return tb.runtime.remote[inst.location].client.instance(inst.id)["pid"]


CASES = [(c, "host") for c in _cases()] + [(c, "snic0") for c in _cases() if c.nf_type in ("nat", "monitor")]


@pytest.mark.parametrize(("case", "at"), CASES, ids=lambda x: x if isinstance(x, str) else x.nf_type)
def test_config_in_place_keeps_connections_and_counters(case: Case, at: str):
    """`at`: where the NF runs (an sNIC's instance takes its config through its agent's API)."""
    tb = Testbed(warm_slots=0)
    try:
        tb.up()
        nfs = [("x", case.nf_type, case.config, at)]
        if case.nf_type == "ipsec":
            nfs.append(("xb", "ipsec", _ipsec("b"), "host"))
        chain = TcpChain(0, End("wire"), nfs, nat=case.nat, target=case.target)
        add_chains(tb, [chain])
        api = create_app(tb.agent).test_client()
        nf = tb.agent.state.nfs["x"]
        seen: dict = {}

        def change() -> None:
            inst = nf.instances[0]
            was = (inst.id, _pid(tb, inst))
            before = nf_counters(tb, "x")
            seen["before"] = before
            r = api.patch("/v1/nfs/x", json={"config": case.bad})
            seen["bad"] = (r.status_code, r.get_json())
            seen["after_bad"] = (nf.instances[0].id, _pid(tb, nf.instances[0]), nf.config)
            r = api.patch("/v1/nfs/x", json={"config": case.new})
            seen["new"] = (r.status_code, r.get_json())
            seen["same"] = (nf.instances[0].id, _pid(tb, nf.instances[0])) == was
            seen["was"] = was

        [rep] = run(tb, [chain], conns=4, seconds=6, during=change)
        status, body = seen["bad"]
        assert status == 400 and body["field"].startswith(case.field), body
        assert seen["after_bad"] == (*seen["was"], case.config)
        assert nf.instances[0].location == at
        status, body = seen["new"]
        assert status == 200 and body["config_applied"] == "in-place", body
        assert seen["same"] and tb.runtime.alive(nf.instances[0])
        assert nf.config == case.new
        after = nf_counters(tb, "x")
        assert after["counters"]["reconfigured"] == 1, after["counters"]
        was, now = _count(seen["before"]["nf_stats"], case.counter), _count(after["nf_stats"], case.counter)
        assert now >= was > 0, (case.counter, was, now)
        assert after["counters"]["rx"] > seen["before"]["counters"]["rx"]  # the same process counts on
        assert rep["broken"] == 0 and rep["stalled"] == 0, rep
        assert rep["echoed"] > 0.9 * rep["sent"], rep
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY
