"""Names of everything an emulated host creates, all derived from its instance name (pure functions).

Every name starts with "<name>-" so that `uno down` finds its own objects, and only those, also after a crash.
"""

from __future__ import annotations

import re

from domain.vports import (  # noqa: F401
    VPORT_ETH_BASE,
    VPORT_ETH_STRIDE,
    VPORT_NF_BASE,
    VPORT_VM_BASE,
    vport_eth,
    vport_vm,
)

# The virtual port numbers of the host's own endpoints (VMs, sNIC Ethernet ports), named with the rest.
from host_datapath.sysutil import MAX_UNIX_PATH  # noqa: F401 (Redis's socket in the rundir must fit)
from nf_local.processes import NF_PORT_BASE  # noqa: F401

# OpenFlow port numbering on the two kinds of switch (NF instances take theirs from nf_local's NF_PORT_BASE).
HOST_PCIE_OFPORT_BASE = 1  # host side of sNIC k's PCIe link: 1 + k
HOST_VM_OFPORT_BASE = 100  # VM i: 100 + i
SNIC_ETH_OFPORT_BASE = 1  # Ethernet port j: 1 + j
SNIC_PCIE_OFPORT = 100  # sNIC side of its PCIe link


NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,5}$")


def valid_name(n: str) -> bool:
    """Instance names: 1-6 characters [a-z0-9], starting with a letter (the longest derived name fits 15)."""
    return bool(NAME_RE.match(n))


def ns_host(n: str) -> str:
    return f"{n}-host"


def ns_snic(n: str, k: int) -> str:
    return f"{n}-snic{k}"


def ns_vm(n: str, i: int) -> str:
    return f"{n}-vm{i}"


def ns_outside(n: str, k: int, j: int) -> str:
    return f"{n}-o{k}{j}"


def bridge_host(n: str) -> str:
    return f"{n}-hbr"


def bridge_snic(n: str, k: int) -> str:
    return f"{n}-s{k}br"


def if_vm(n: str, i: int) -> tuple[str, str]:
    """(inside the VM, on the host bridge)."""
    return f"{n}-v{i}", f"{n}-v{i}p"


def if_pcie(n: str, k: int) -> tuple[str, str]:
    """(host end, sNIC end)."""
    return f"{n}-p{k}h", f"{n}-p{k}s"


def if_eth(n: str, k: int, j: int) -> tuple[str, str]:
    """(on the sNIC bridge, in the outside namespace)."""
    return f"{n}-e{k}{j}s", f"{n}-e{k}{j}"


def cgroup_snic(n: str, k: int) -> str:
    return f"uno-{n}-snic{k}"


def ip_vm(i: int) -> str:
    return f"10.77.0.{10 + i}"


def ip_outside(k: int, j: int) -> str:
    return f"10.77.{1 + k}.{1 + j}"


def mac(kind: int, a: int, b: int) -> str:
    """Locally administered, deterministic: 02:75:6e:<kind>:<a>:<b>."""
    return f"02:75:6e:{kind:02x}:{a:02x}:{b:02x}"


def dpid(n: str) -> str:
    """OneSwitch's datapath id for host `n`: 16 hex digits, the name's bytes (unique per instance name)."""
    return n.encode().hex().rjust(16, "0")


def owned_namespaces(n: str, existing: list[str]) -> list[str]:
    """Namespaces of host `n`: ours and any the agent/NFs added with the `n-` prefix (names are [a-z0-9])."""
    pat = re.compile(rf"^{re.escape(n)}-[A-Za-z0-9_.-]+$")
    return [ns for ns in existing if pat.match(ns)]


def if_mgmt(n: str, k: int) -> tuple[str, str]:
    """sNIC k's management link: (host end, in the root namespace; sNIC end, in its namespace)."""
    return f"{n}-m{k}h", f"{n}-m{k}s"


def snic_prefix(n: str, k: int) -> str:
    """Prefix of what sNIC k's agent makes (its NFs' namespaces and interfaces): `uno down` sweeps `n-`."""
    return f"{n}-s{k}"


MGMT_NET = 0x0AFC0000  # 10.252.0.0/16: the emulated sNICs' management links, one /30 each


def mgmt_addresses(j: int) -> tuple[str, str]:
    """The j-th /30 of the management range: (host end, sNIC end)."""
    base = MGMT_NET + 4 * (j % 16384)
    dotted = lambda a: ".".join(str((a >> s) & 255) for s in (24, 16, 8, 0))  # noqa: E731
    return dotted(base + 1), dotted(base + 2)


def if_vm_vhost(n: str, i: int) -> str:
    """VM i's vhost-user port on an external host switch (an OVS port, no kernel device), unless named."""
    return f"{n}-vu{i}"


def ns_nfs(n: str) -> str:
    """Where the host's NFs run with a TCP state tier (a cluster or an operator's tier): one namespace
    linked to the root namespace, as an sNIC's NFs run in the sNIC's."""
    return f"{n}-nfs"


def if_tier(n: str) -> tuple[str, str]:
    """The host NFs' namespace's link to the tier: (root namespace end, NF namespace end)."""
    return f"{n}-th", f"{n}-tn"
