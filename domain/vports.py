"""Virtual port numbering on OneSwitch: the port numbers the controller sees.

Fixed for the host's own endpoints, so a controller's rules survive a restart: sNIC k's Ethernet port j is
1 + 8*k + j (1..64: at most 8 sNICs with 8 ports each), VM i is 100 + i. NF ports get vports from
VPORT_NF_BASE up, allocated by the agent when it maps the NF's physical port (VPORT_NF_BASE + n is not tied
to any physical port number).
"""

from __future__ import annotations

VPORT_ETH_BASE = 1
VPORT_ETH_STRIDE = 8
VPORT_VM_BASE = 100
VPORT_NF_BASE = 200


def vport_eth(k: int, j: int) -> int:
    """Virtual port of sNIC k's Ethernet port j."""
    return VPORT_ETH_BASE + VPORT_ETH_STRIDE * k + j


def vport_vm(i: int) -> int:
    """Virtual port of VM i."""
    return VPORT_VM_BASE + i
