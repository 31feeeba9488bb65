"""A BlueField DPU's switch: the Arm side's OVS, reached over TCP (OVSDB and an OpenFlow listener).

UNO does not start or stop that OVS (the DPU's OS owns it); it creates its bridge and ports idempotently and
drives it exactly like the host switch. On a real DPU set `other_config:hw-offload=true` there.
"""

from __future__ import annotations

from dataclasses import dataclass

from host_datapath.switch import SwitchDriver


@dataclass
class BlueFieldSnic:
    bridge: str
    ovsdb: str
    openflow: str
    datapath_type: str = ""
    manage: bool = True  # create/settle the bridge; False: the DPU's own agent and operator keep it

    def __post_init__(self) -> None:
        self.driver = SwitchDriver(
            self.bridge, self.ovsdb, openflow=self.openflow, datapath_type=self.datapath_type
        )

    def up(self) -> None:
        if self.manage:
            self.driver.ensure_bridge()

    def down(self) -> None:
        self.driver.close()

    def status(self) -> dict:
        return {"backend": "bluefield", "bridge": self.bridge, "ovsdb": self.ovsdb, "openflow": self.openflow}
