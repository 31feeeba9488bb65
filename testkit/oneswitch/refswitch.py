"""The reference: one plain Open vSwitch bridge whose OpenFlow ports are numbered as the virtual ports.

Its own OVS instance (HostSwitch: ovsdb-server + netdev vswitchd in its own namespace), and per virtual port V
a namespace `NAME-pV` with a veth `NAME-pV` <-> `NAME-pVs` plugged in as OpenFlow port V. Rules go to it with
ovs-ofctl on its management socket. `down()` removes everything (also after a failed `up()`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from host_datapath.host_switch import HostSwitch
from host_datapath.sysutil import kill_and_wait, netns_del, netns_list, netns_pids, run
from testkit.oneswitch.pktio import Endpoint

RUNDIR = Path("/run/uno-test")


@dataclass
class RefSwitch:
    name: str  # unique, 1-6 chars [a-z0-9] (as an emulated host name)
    vports: list[int]
    dpid: str | None = None  # 16 hex digits (as OneSwitch's, for a controller configured by dpid)
    base: Path = RUNDIR
    sw: HostSwitch = field(init=False)

    def __post_init__(self) -> None:
        self.rundir = self.base / self.name
        self.sw = HostSwitch(f"{self.name}-ref", self.rundir, f"{self.name}-rbr")

    @property
    def target(self) -> str:
        """ovs-ofctl target (the bridge's management socket)."""
        return f"unix:{self.rundir}/{self.sw.bridge}.mgmt"

    def up(self) -> RefSwitch:
        try:
            self.sw.up()
            if self.dpid:
                run(["ovs-vsctl", f"--db={self.sw.ovs.db_remote}", "set", "bridge", self.sw.bridge,
                     f"other-config:datapath-id={self.dpid}"])  # fmt: skip
            for v in self.vports:
                ns, inside, port = f"{self.name}-p{v}", f"{self.name}-p{v}", f"{self.name}-p{v}s"
                self.sw.attach_namespace(ns, inside, port, v)
        except BaseException:
            self.down()
            raise
        return self

    def endpoints(self) -> dict[int, list[Endpoint]]:
        return {v: [Endpoint(f"{self.name}-p{v}", f"{self.name}-p{v}")] for v in self.vports}

    def down(self) -> None:
        try:
            self.sw.down()
        finally:
            for ns in netns_list():
                if ns.startswith(f"{self.name}-"):
                    for pid in netns_pids(ns):
                        kill_and_wait(pid)
                    netns_del(ns)
            shutil.rmtree(self.rundir, ignore_errors=True)
