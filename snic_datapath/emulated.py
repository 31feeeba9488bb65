"""An emulated SmartNIC: its own namespace, OVS and bridge (a DPU runs its own OS and OVS), Ethernet ports
as veths to outside namespaces (the wire), and a CPU-quota cgroup for the NFs placed on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from host_datapath.host_switch import HostSwitch
from snic_datapath.cgroup import CpuCgroup, default_period_us


@dataclass
class EmulatedSnic(HostSwitch):
    """Same driver as the host switch, plus the sNIC's compute budget as a cgroup."""

    cgroup_name: str = ""
    cpu_quota: float = 0.5
    cpu_period_us: int | None = None  # None: default_period_us(cpu_quota)
    ovsdb_tcp_port: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.cgroup = CpuCgroup(self.cgroup_name)

    def up(self) -> None:
        from host_datapath.sysutil import netns_add

        netns_add(self.netns)
        self.ovs.start(ovsdb_tcp_port=self.ovsdb_tcp_port)
        self.driver.ensure_bridge()
        self.endpoint.start()
        self.cgroup.create(self.cpu_quota, self.cpu_period_us or default_period_us(self.cpu_quota))

    def down(self) -> None:
        super().down()
        self.cgroup.destroy()

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
        return out


__all__ = ["EmulatedSnic", "Path"]
