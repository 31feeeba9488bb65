"""Kernel TCP connections through chains of NFs on a testbed (testkit.testbed), steered by OneSwitch rules as a
controller would install them, while something happens to the NFs (an instance killed, a whole sNIC dead).

A chain runs from a VM to an end (an outside namespace behind an sNIC's wire port, or another VM) through NFs
in order; `steer` installs every chain's rules at once (demo.chain.steering_rules) and static neighbours, so no
ARP crosses the chains. `run` starts one echo server per chain end and one client per VM
(testkit.probes), calls `during()` while they run, and returns each client's report."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from demo.chain import Chain, steering_rules
from domain.vports import vport_eth, vport_vm
from emulated_host import naming as nm
from nf_agent.graph import chain_links
from nf_agent.validation import NfRequest, VmRequest
from testkit.testbed import Testbed

REPO = Path(__file__).resolve().parents[1]
PUBLIC_IP = "198.51.100.1"
NAT = {"inside": ["10.77.0.0/24"], "public_ips": [PUBLIC_IP], "ports": "20000-29999"}


def fw_tcp(vm: int) -> dict:
    """A stateful firewall: TCP (and UDP) opened by VM `vm` passes both ways, nothing else."""
    src = f"{nm.ip_vm(vm)}/32"
    return {"rules": [{"action": "allow", "proto": p, "src": src, "dst": "any"} for p in ("tcp", "udp")],
            "default": "deny"}  # fmt: skip


@dataclass
class End:
    """Where a chain ends: an outside namespace (sNIC k's wire port j) or VM i."""

    kind: str  # "wire" | "vm"
    k: int = 0
    j: int = 0

    def vport(self) -> int:
        return vport_eth(self.k, self.j) if self.kind == "wire" else vport_vm(self.k)

    def mac(self) -> str:
        return nm.mac(2, self.k, self.j) if self.kind == "wire" else nm.mac(1, 0, self.k)

    def ip(self) -> str:
        return nm.ip_outside(self.k, self.j) if self.kind == "wire" else nm.ip_vm(self.k)

    def netns(self, host: str) -> str:
        return nm.ns_outside(host, self.k, self.j) if self.kind == "wire" else nm.ns_vm(host, self.k)

    def ifname(self, host: str) -> str:
        return nm.if_eth(host, self.k, self.j)[1] if self.kind == "wire" else nm.if_vm(host, self.k)[0]

    def vertex(self) -> str:
        return f"snic{self.k}-eth{self.j}" if self.kind == "wire" else f"vm{self.k}"


@dataclass
class TcpChain:
    vm: int
    end: End
    nfs: list[tuple[str, str, dict, str]]  # (id, type, config, where it starts)
    nat: bool = False  # the end sees the NAT's public address: it needs a neighbour entry for it
    target: str | None = None  # the address the VM connects to (a load balancer's VIP), else the end's

    def dst_ip(self) -> str:
        return self.target or self.end.ip()


def add_chains(tb: Testbed, chains: list[TcpChain]) -> None:
    """Create the chains' VMs and NFs through the agent (each NF where its chain says, by hint), then steer."""
    for c in chains:
        for i in (c.vm, *([c.end.k] if c.end.kind == "vm" else [])):
            if f"vm{i}" not in tb.agent.state.vms:
                tb.agent.create_vm(VmRequest(id=f"vm{i}"))
    for c in chains:
        for nf_id, nf_type, config, at in c.nfs:
            nf = tb.agent.create_nf(NfRequest(nf_id, nf_type, config, 0.05, None, None, None, at))
            if nf.location != at:
                tb.agent.migrate(nf, at)
        for nf_id, src, dst in chain_links([f"vm{c.vm}", *(n[0] for n in c.nfs), c.end.vertex()]):
            tb.agent.update_nf(nf_id, {"src": src, "dst": dst})
    steer(tb, chains)


def steer(tb: Testbed, chains: list[TcpChain]) -> None:
    vports = {n: tb.agent.state.nfs[n].vport for c in chains for n, *_ in c.nfs}
    rules = steering_rules([Chain(vport_vm(c.vm), nm.mac(1, 0, c.vm), c.end.vport(), c.end.mac(),
                                  tuple(vports[n[0]] for n in c.nfs)) for c in chains])  # fmt: skip
    tb._ofctl("del-flows")
    for r in rules:
        macs = (f",dl_src={r.eth_src}" if r.eth_src else "") + (f",dl_dst={r.eth_dst}" if r.eth_dst else "")
        tb._ofctl("add-flow", f"priority={r.priority},in_port={r.in_port}{macs},actions=output:{r.out_port}")
    n = tb.name
    for c in chains:
        vm_ns, vm_if = nm.ns_vm(n, c.vm), nm.if_vm(n, c.vm)[0]
        end_ns, end_if = c.end.netns(n), c.end.ifname(n)
        _ip(vm_ns, "neigh", "replace", c.end.ip(), "lladdr", c.end.mac(), "dev", vm_if)
        if c.target:
            _ip(vm_ns, "route", "replace", f"{c.target}/32", "dev", vm_if)
            _ip(vm_ns, "neigh", "replace", c.target, "lladdr", c.end.mac(), "dev", vm_if)
        src_ip = PUBLIC_IP if c.nat else nm.ip_vm(c.vm)
        if c.nat:
            _ip(end_ns, "route", "replace", f"{PUBLIC_IP}/32", "dev", end_if)
        _ip(end_ns, "neigh", "replace", src_ip, "lladdr", nm.mac(1, 0, c.vm), "dev", end_if)


def _ip(ns: str, *args: str) -> None:
    subprocess.run(["ip", "-n", ns, *args], check=True, capture_output=True, timeout=10)


def run(tb: Testbed, chains: list[TcpChain], conns: int, seconds: float, during: Callable[[], None],
        port: int = 5600, every_ms: float = 20.0, udp: list[dict] | None = None) -> list[dict]:  # fmt: skip
    """`conns` TCP connections per chain for `seconds`; `during()` runs once they all carry data. Returns each
    chain's client report (testkit.probes). With `udp` (a list), also a datagram per ms along each chain; each
    chain's sink report (its longest gap: the path's outage) is appended to it."""
    n = tb.name
    py = [sys.executable, "-m", "testkit.probes"]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    servers, clients = [], []
    for c in chains:
        servers.append(subprocess.Popen(["ip", "netns", "exec", c.end.netns(n), *py, "server", c.end.ip(), str(port),
                                         str(seconds + 30)], stdout=subprocess.PIPE, text=True, env=env))  # fmt: skip
    sinks, senders = [], []
    for c in chains if udp is not None else []:
        sinks.append(subprocess.Popen(["ip", "netns", "exec", c.end.netns(n), *py, "udp-sink", "0.0.0.0",
                                       str(port + 1), str(seconds + 1)], stdout=subprocess.PIPE, text=True, env=env))  # fmt: skip
    time.sleep(0.5)
    for c in chains if udp is not None else []:
        senders.append(subprocess.Popen(["ip", "netns", "exec", nm.ns_vm(n, c.vm), *py, "udp-send", c.dst_ip(),
                                         str(port + 1), str(seconds)], stdout=subprocess.PIPE, text=True, env=env))  # fmt: skip
    tb.procs += sinks + senders
    for c in chains:
        clients.append(subprocess.Popen(["ip", "netns", "exec", nm.ns_vm(n, c.vm), *py, "client", c.dst_ip(),
                                         str(port), str(conns), str(seconds), "--every-ms", str(every_ms)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))  # fmt: skip
    tb.procs += servers + clients
    time.sleep(min(2.0, seconds / 4))
    during()
    out = []
    for p in clients:
        stdout, stderr = p.communicate(timeout=seconds + 60)
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        out.append(json.loads(lines[-1]) if lines else {"error": stderr.strip()[-300:], "broken": conns})
    for p in servers:
        p.kill()
    for p in senders:
        p.communicate(timeout=60)
    for p in sinks:
        stdout, _ = p.communicate(timeout=seconds + 60)
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        udp.append(json.loads(lines[-1]) if lines else {"received": 0, "lost": -1, "max_gap_ms": None})  # type: ignore[union-attr]
    return out
