"""A real bench for migration and failover: an emulated host with OneSwitch and Redis, the agent in-process
(real NF processes in namespaces, real port mapping), one firewall chained VM <-> firewall <-> wire by
rules on OneSwitch, and sequenced UDP streams from `traffic gen` to `traffic sink` through it.

Used by tests/migration/test_live.py and bench/migration/run.py. Everything is removed by `close()`
(also after a failure: use it as a context manager).
"""

from __future__ import annotations

import contextlib
import subprocess
import uuid

from emulated_host import agent_endpoint
from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost
from migration.failover import DetectorConfig, Watchdog
from nf_agent.graph import SnicInfo
from nf_agent.service import Agent, AgentConfig
from nf_agent.validation import NfRequest, VmRequest
from nf_runtime.portmap import OneSwitchPortMapper
from nf_runtime.runtime import NF_BINARY, HostRuntime
from placement.profiles import load_profiles
from testkit.procs import last_json

TRAFFIC = NF_BINARY.parent / "traffic"
# New connections may only be opened from the VM side; the wire side gets through only on an established
# connection (the firewall's state: in Redis, or in the process with --store local).
FW_CONFIG = {
    "rules": [{"action": "allow", "proto": "udp", "src": f"{nm.ip_vm(0)}/32", "dst": "any"}],
    "default": "deny",
}
# The IPS of the TCP-stream test and the hold bench: one signature, dropped.
IPS_CONFIG = {"signatures": [{"id": 1, "msg": "x", "content": "EVIL-DEMO-PAYLOAD"}], "action": "drop"}
VM_MAC, OUT_MAC = nm.mac(1, 0, 0), nm.mac(2, 0, 0)
# One flow whose reverse the wire side can send: traffic gen uses source port 10000 + flow.
EST_PORT = 10000


class Testbed:
    __test__ = False  # not a pytest class

    def __init__(
        self, rundir: str = "/run/uno-test", store: str = "redis", drain_s: float = 0.5, warm_slots: int = 0,
        snics: int = 1, vms: int = 1, redis: dict | None = None, name: str | None = None,
        max_rules: int | None = None,
    ):  # fmt: skip
        """`warm_slots`: pre-created NF slots per location (the host's runtime and the sNIC's agent; 0 = every
        start is cold). `redis`: the host config's `redis:` (the state tier; default: one local Redis).
        `max_rules`: every sNIC's rule budget for offloaded tables (switching offload)."""
        self.name = name or "m" + uuid.uuid4().hex[:5]
        self.host = EmulatedHost(
            parse_config(
                {
                    "name": self.name,
                    "rundir": rundir,
                    "vms": vms,
                    "oneswitch": {"enabled": True},
                    "snics": [
                        {"id": f"snic{k}", "warm_slots": warm_slots}
                        | ({"max_rules": max_rules} if max_rules is not None else {})
                        for k in range(snics)
                    ],
                    **({"redis": redis} if redis else {}),
                }
            )  # fmt: skip
        )
        self.store, self.drain_s, self.warm_slots = store, drain_s, warm_slots
        self.runtime: HostRuntime | None = None
        self.agent: Agent | None = None
        self.watchdog: Watchdog | None = None
        self.procs: list[subprocess.Popen] = []
        n = self.name
        self.vm_ns, self.vm_if = nm.ns_vm(n, 0), nm.if_vm(n, 0)[0]
        self.out_ns, self.out_if = nm.ns_outside(n, 0, 0), nm.if_eth(n, 0, 0)[1]

    # -- set-up / tear-down --------------------------------------------------------------------------------
    def up(self) -> Testbed:
        status = self.host.up()
        adir = agent_endpoint.agent_dir(self.host.rundir)
        adir.mkdir(parents=True, exist_ok=True)
        redis = status["redis"]
        self.runtime = HostRuntime(
            self.host, adir, redis["port"], store=self.store, warm_slots=self.warm_slots,
            redis_socket=redis.get("unix_socket"), tier=self.host.tier(),
        )  # fmt: skip
        self.runtime.open()
        snics = [
            SnicInfo(
                s.id,
                float(s.capacity),
                float(s.pcie_gbps) if s.pcie_gbps > 0 else 1e4,
                s.eth_ports,
                s.max_rules,
            )
            for s in self.host.config.snics
            if s.id in self.runtime.locations()
        ]
        cfg = AgentConfig(snics=snics, vm_slots=self.host.config.vms, profiles=load_profiles())
        mapper = OneSwitchPortMapper(self.host.oneswitch().client())
        self.agent = Agent(
            cfg, self.runtime, mapper, adir / "state.json", drain_s=self.drain_s,
            tables=self.host.oneswitch().client(),
        )  # fmt: skip
        self.listen = status["oneswitch"]["listen"]
        return self

    def add_firewall(self, nf_id: str = "fw", at: str = "host") -> int:
        return self.add_nf(nf_id, "firewall", FW_CONFIG, at)

    def add_nf(
        self, nf_id: str, nf_type: str, config: dict, at: str = "host", pin: bool = False,
        macs: tuple[str, str] = (VM_MAC, OUT_MAC), tenant: str = "default", wait: str | None = None,
    ) -> int:  # fmt: skip
        """One NF of `nf_type` at `at` (pinned there with `pin`, else preferred and moved there), chained
        VM <-> NF <-> wire for frames from the VM's and the wire's `macs`; returns its virtual port."""
        if not self.agent.state.vms:
            self.agent.create_vm(VmRequest(id="web", tenant=tenant))
        nf = self.agent.create_nf(
            NfRequest(
                id=nf_id,
                type=nf_type,
                config=config,
                expected_gbps=0.1,
                src=None,
                dst="web",
                pin=at if pin else None,
                prefer=None if pin else at,
                tenant=tenant,
                store_wait=wait,
            )  # fmt: skip
        )
        if nf.location != at:
            self.agent.migrate(nf, at)
        self.steer(nf.vport, *macs)
        return nf.vport

    def steer(self, vport: int, vm_mac: str, out_mac: str) -> None:
        """OneSwitch's rules, as a controller: VM and wire -> `vport`; back from it by source MAC (a one-arm
        NF): the VM's frames to the wire, the wire's to the VM."""
        eth, vmp = nm.vport_eth(0, 0), nm.vport_vm(0)
        self._ofctl("del-flows")
        for f in (f"in_port={vmp},actions=output:{vport}", f"in_port={eth},actions=output:{vport}",
                  f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
                  f"in_port={vport},dl_src={out_mac},actions=output:{vmp}"):  # fmt: skip
            self._ofctl("add-flow", f)

    def _ofctl(self, cmd: str, *args: str) -> None:
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", cmd, self.listen, *args], check=True,
                       capture_output=True, timeout=30)  # fmt: skip

    def start_watchdog(self, cfg: DetectorConfig | None = None, snics: bool = True) -> Watchdog:
        """The failover watchdog, and (`snics`) the sNICs' heartbeats, as `uno agent serve` runs them."""
        agent = self.agent
        agent.cfg.failover = True
        if snics:
            self.runtime.watch_snics(agent.snic_dead, agent.snic_back,
                                     lambda _sid, inst_id: agent.instance_failed(inst_id, "dead"))  # fmt: skip
        self.watchdog = Watchdog(agent.probe, agent.instance_failed, cfg, pids=agent.instance_pids).start()
        return self.watchdog

    def close(self) -> None:
        if self.watchdog:
            self.watchdog.stop()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(Exception):
                p.wait(timeout=10)
        try:
            if self.agent:
                for nf_id in list(self.agent.state.nfs):
                    with contextlib.suppress(Exception):
                        self.agent.delete_nf(nf_id)
            if self.runtime:
                self.runtime.close()
        finally:
            self.host.down()

    def __enter__(self) -> Testbed:
        try:
            return self.up()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    # -- traffic -------------------------------------------------------------------------------------------
    def _spawn(self, ns: str, args: list[str]) -> subprocess.Popen:
        p = subprocess.Popen(["ip", "netns", "exec", ns, str(TRAFFIC), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
        self.procs.append(p)
        return p

    def sink(self, side: str, run: int, expect: int | None = None, idle_ms: int = 3000,
             duration_ms: int = 120_000) -> subprocess.Popen:  # fmt: skip
        """A sink in the VM ("vm") or on the wire ("out"); returns once it listens."""
        ns, iface = (self.vm_ns, self.vm_if) if side == "vm" else (self.out_ns, self.out_if)
        args = ["sink", "--port", iface, "--run", str(run), "--idle-ms", str(idle_ms),
                "--duration-ms", str(duration_ms)] + (["--expect", str(expect)] if expect else [])  # fmt: skip
        p = self._spawn(ns, args)
        line = p.stdout.readline()
        if '"ready"' not in line:
            raise RuntimeError(f"traffic sink did not start: {line} {p.stderr.read() if p.poll() else ''}")
        return p

    def gen(self, side: str, run: int, flows: int, pkts: int, rate: float, dst_port: int = 5001,
            size: int = 64, tcp: bool = False, macs: tuple[str, str] | None = None) -> subprocess.Popen:  # fmt: skip
        """A generator from the VM ("vm", to the wire) or from the wire ("out", to the VM); `tcp`: TCP flows
        (SYN, SYN+ACK from the server's address, ACK, data, FIN, FIN+ACK: `traffic gen` without --udp) instead
        of UDP; `macs`: (VM side, wire side) source/destination MACs instead of the namespaces' own (TCP: so
        that neither kernel answers the generator's segments with RSTs; the NF's chain must steer them)."""
        if side == "vm":
            ns, iface, src, dst, smac, dmac = (
                self.vm_ns,
                self.vm_if,
                nm.ip_vm(0),
                nm.ip_outside(0, 0),
                VM_MAC,
                OUT_MAC,
            )
            if macs:
                smac, dmac = macs
        else:
            ns, iface, src, dst, smac, dmac = (
                self.out_ns,
                self.out_if,
                nm.ip_outside(0, 0),
                nm.ip_vm(0),
                OUT_MAC,
                VM_MAC,
            )
            if macs:
                dmac, smac = macs
        return self._spawn(ns, ["gen", "--port", iface, *([] if tcp else ["--udp"]), "--run", str(run), "--flows", str(flows),
                                "--pkts", str(pkts), "--rate", str(rate), "--size", str(size),
                                "--src", src, "--dst", dst, "--src-mac", smac, "--dst-mac", dmac,
                                "--dst-port", str(dst_port)])  # fmt: skip


def report(p: subprocess.Popen, timeout: float = 180) -> dict:
    """The last JSON line a traffic process printed (waits for it to exit)."""
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0 or "{" not in out:
        raise RuntimeError(f"traffic exited {p.returncode}: {err.strip()[-300:]}")
    return last_json(out)


@contextlib.contextmanager
def firewall_bed(at: str = "host", **kwargs):
    """A Testbed (`kwargs`) up with the firewall `fw` at `at`; closed on exit, pass or fail, and checked:
    nothing of it left on the machine."""
    from testkit.hosts import EMPTY, machine_snapshot

    tb = Testbed(**kwargs)
    try:
        tb.up()
        tb.add_firewall("fw", at=at)
        yield tb
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


def nf_counters(tb: Testbed, nf_id: str = "fw") -> dict:
    """The NF's /stats counters of its current instance ({} if unreadable)."""
    inst = tb.agent.state.nfs[nf_id].instances[0]
    st = tb.runtime.stats(inst) or {}
    return st


__all__ = ["EST_PORT", "FW_CONFIG", "Testbed", "firewall_bed", "nf_counters", "report"]
