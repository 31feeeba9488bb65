"""An emulated SmartNIC: a separate machine on this one. Its network namespace is its network, its directory
(never under the host's run directory) its disk; its own OVS and bridge, Ethernet ports as veths to outside
namespaces (the wire). With a management link it runs an sNIC agent (snic_agent/) listening on the sNIC's
management address, which starts its NFs in the sNIC's CPU cgroup, and its bridge takes OpenFlow on that
address: the host reaches it only over that link, as it would a DPU.

Without a management link it is only a switch (an OVS in a namespace): the foundation tests and the
"bluefield" tests use it so, reaching its OVSDB and OpenFlow over TCP."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from host_datapath.host_switch import HostSwitch
from host_datapath.snic_agent_client import SnicAgentClient, SnicAgentError
from host_datapath.sysutil import (
    DatapathError,
    kill_and_wait,
    netns_add,
    netns_list,
    netns_members,
    read_pidfile,
    tcp_open,
    wait_for,
)
from nf_local.command import spawn_command
from snic_datapath.cgroup import CpuCgroup, default_period_us

REPO_ROOT = Path(__file__).resolve().parents[1]
AGENT_PORT = 7700
OPENFLOW_PORT = 6653


@dataclass(frozen=True)
class MgmtLink:
    """The management link between the host (its root namespace) and the sNIC: a veth pair with a /30."""

    host_if: str
    snic_if: str
    host_ip: str
    snic_ip: str


@dataclass(frozen=True)
class AgentSpec:
    """What the sNIC agent on an emulated sNIC is told in its config (snic_agent/config.py)."""

    snic: str
    prefix: str
    warm_slots: int = 0
    pcie_port: str | None = None  # None: its agent discovers it (a BlueField's pfNhpf)
    wire_ports: tuple[str, ...] | None = None  # None: discovered (pN)
    nf_binary: str | None = None


@dataclass
class EmulatedSnic(HostSwitch):
    """Same driver as the host switch, plus the sNIC's compute budget as a cgroup (made by its agent when it
    has one) and, with `mgmt` and `agent`, its sNIC agent."""

    cgroup_name: str = ""
    cpu_quota: float = 0.5
    cpu_period_us: int | None = None  # None: default_period_us(cpu_quota)
    ovsdb_tcp_port: int | None = None
    mgmt: MgmtLink | None = None
    agent: AgentSpec | None = None
    token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.cgroup = CpuCgroup(self.cgroup_name)
        if self.mgmt is not None:  # OneSwitch connects over the management link
            self.driver.listeners = (*self.driver.listeners, f"ptcp:{OPENFLOW_PORT}:{self.mgmt.snic_ip}")

    # -- the machine --------------------------------------------------------------------------------------------
    @property
    def agent_dir(self) -> Path:
        return self.rundir / "agent"

    @property
    def token_file(self) -> Path:
        return self.rundir / "agent.token"

    def openflow_target(self) -> str:
        """Where OneSwitch reaches the bridge: its listener on the management address (or the TCP relay)."""
        if self.mgmt is not None:
            return f"tcp:{self.mgmt.snic_ip}:{OPENFLOW_PORT}"
        return self.endpoint.target() or ""

    def agent_url(self) -> str | None:
        return f"http://{self.mgmt.snic_ip}:{AGENT_PORT}" if self.mgmt and self.agent else None

    def up(self) -> None:
        netns_add(self.netns)
        self.ovs.start(ovsdb_tcp_port=self.ovsdb_tcp_port)
        self.driver.ensure_bridge()
        if self.mgmt is None:
            self.endpoint.start()
        if self.agent is None:
            self.cgroup.create(self.cpu_quota, self.cpu_period_us or default_period_us(self.cpu_quota))
        else:
            self.start_agent()

    def start_agent(self) -> None:
        """Start the sNIC agent in the sNIC's namespace (idempotent) and wait until it answers on its
        management address. It writes its token and config on the sNIC's disk first."""
        assert self.mgmt is not None and self.agent is not None
        if self.agent_pid():
            return
        self.rundir.mkdir(parents=True, exist_ok=True)
        if not self.token_file.exists():
            self.token_file.write_text(self.token or secrets.token_urlsafe(24))
            self.token_file.chmod(0o600)
        a = self.agent
        cfg = {
            "snic": a.snic, "listen": f"{self.mgmt.snic_ip}:{AGENT_PORT}", "token_file": str(self.token_file),
            "dir": str(self.agent_dir), "prefix": a.prefix, "bridge": self.bridge, "ovsdb": self.ovs.db_remote,
            "switch_netns": self.netns, "cgroup": self.cgroup_name, "cpu_quota": self.cpu_quota,
            "cpu_period_us": self.cpu_period_us or default_period_us(self.cpu_quota),
            "warm_slots": a.warm_slots, "pcie_port": a.pcie_port,
            "wire_ports": list(a.wire_ports) if a.wire_ports is not None else None,
            **({"nf_binary": a.nf_binary} if a.nf_binary else {}),
        }  # fmt: skip
        conf = self.rundir / "agent.json"
        conf.write_text(json.dumps(cfg, indent=1))
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        log = self.rundir / "agent.out"
        cmd = [sys.executable, "-m", "uno_cli.main", "snic", "agent", "--config", str(conf)]
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        import subprocess

        with open(log, "ab") as out:
            subprocess.Popen(spawn_command(cmd, self.netns), stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True, close_fds=True, cwd=REPO_ROOT,
                             env=env)  # fmt: skip
        try:
            wait_for(lambda: tcp_open(AGENT_PORT, self.mgmt.snic_ip), 30, f"the sNIC agent of {a.snic}")
        except DatapathError:
            tail = log.read_text(errors="replace")[-400:] if log.exists() else ""
            raise DatapathError(f"the sNIC agent of {a.snic} did not start: {tail}") from None

    def agent_pid(self) -> int | None:
        return read_pidfile(self.agent_dir / "agent.pid")

    def stop_agent(self, sig: int = signal.SIGTERM) -> None:
        pid = self.agent_pid()
        if pid:
            if sig == signal.SIGKILL:
                os.kill(pid, sig)
            else:
                kill_and_wait(pid)

    def kill(self) -> None:
        """The whole sNIC dies at once (a DPU reboot): SIGKILL to its agent, its NFs and its OVS."""
        names = [self.netns]
        if self.agent is not None:
            names += [ns for ns in netns_list() if ns.startswith(f"{self.agent.prefix}-")]
        pids = {self.agent_pid(), *self.ovs.pids().values(), *netns_members(names)}
        for pid in pids - {None}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        for pid in pids - {None}:
            kill_and_wait(pid, 5)

    def down(self) -> None:
        if self.agent is not None:
            self.stop_agent()
        super().down()
        self.cgroup.destroy()

    def port_numbers(self) -> dict[str, int]:
        """With an agent, as the host sees them: through the agent's API ({} when it does not answer)."""
        if self.agent is None:
            return super().port_numbers()
        client = SnicAgentClient(self.agent.snic, self.agent_url(), self.token, timeout=2)
        try:
            return {p["name"]: p["ofport"] for p in client.ports()}
        except SnicAgentError:
            return {}
        finally:
            client.close()

    def status(self) -> dict:
        out = super().status()
        out["backend"] = "emulated"
        out["cgroup"] = {
            "path": str(self.cgroup.dirs()[0]),
            "version": self.cgroup.version,
            "cpu_quota": self.cgroup.quota_cores(),
            "cpu_period_us": self.cgroup.period_us(),
        }
        if self.cgroup.exists():
            t = self.cgroup.throttling()
            out["cgroup"] |= {
                "nr_periods": t.periods,
                "nr_throttled": t.throttled,
                "throttled_s": t.throttled_s,
            }
        if self.ovsdb_tcp_port:
            out["ovsdb_tcp"] = f"tcp:127.0.0.1:{self.ovsdb_tcp_port}"
        if self.mgmt is not None:
            out["mgmt"] = {"host_if": self.mgmt.host_if, "host_ip": self.mgmt.host_ip,
                           "snic_ip": self.mgmt.snic_ip}  # fmt: skip
            out["openflow_tcp"] = self.openflow_target()
        if self.agent is not None:
            out["agent"] = self.agent_url()
            out["agent_pid"] = self.agent_pid()
        return out
