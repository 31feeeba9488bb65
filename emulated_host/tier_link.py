"""The network path from every NF of the host to a TCP state tier (`redis.mode` cluster or external).

The host's NFs then run in one namespace (`naming.ns_nfs`) with a veth to the root namespace, a /30 of the
management range on it and a default route through it; each emulated sNIC's namespace gets a default route
through its management link. A packet to any of the root namespace's own addresses is delivered there (the
cluster's nodes announce the root end of this link), so NFs on the host and on every sNIC reach the same
node addresses, also those of another host's cluster on this machine."""

from __future__ import annotations

from dataclasses import dataclass

from emulated_host import naming as nm
from host_datapath.sysutil import link_exists, netns_add, netns_del, run


@dataclass
class TierLink:
    name: str
    host_ip: str  # the root namespace's end: the address a local cluster announces
    nf_ip: str
    snic_routes: dict[str, str]  # emulated sNIC namespace -> the root end of its management link
    key: str = "tier_link"

    @property
    def netns(self) -> str:
        return nm.ns_nfs(self.name)

    def up(self) -> None:
        root_if, nf_if = nm.if_tier(self.name)
        netns_add(self.netns)
        if not link_exists(root_if):
            run(["ip", "link", "add", root_if, "type", "veth", "peer", "name", nf_if, "netns", self.netns])
        run(["ip", "addr", "replace", f"{self.host_ip}/30", "dev", root_if])
        run(["ip", "link", "set", root_if, "up"])
        run(["ip", "addr", "replace", f"{self.nf_ip}/30", "dev", nf_if], netns=self.netns)
        run(["ip", "link", "set", nf_if, "up"], netns=self.netns)
        run(["ip", "link", "set", "lo", "up"], netns=self.netns)
        run(["ip", "route", "replace", "default", "via", self.host_ip], netns=self.netns)
        for ns, via in self.snic_routes.items():
            run(["ip", "route", "replace", "default", "via", via], netns=ns)

    def down(self) -> None:
        root_if = nm.if_tier(self.name)[0]
        if link_exists(root_if):
            run(["ip", "link", "del", root_if], check=False)
        netns_del(self.netns)

    def status(self) -> dict:
        return {"netns": self.netns, "host_ip": self.host_ip, "nf_ip": self.nf_ip}
