"""The settings of an OVS-DPDK host switch (`host.switch.dpdk` in the config), validated; no I/O but reading
which CPUs this process may run on.

`DpdkOptions(hugepages_mb, pmd_cpu_mask, socket_mem, pci)`:
- `hugepages_mb`: 2 MB hugepages UNO makes sure are there (reserved by `uno up` if the free ones do not
  suffice, given back by `uno down`), an even number of MB;
- `pmd_cpu_mask`: hex CPU mask of the PMD threads (`other_config:pmd-cpu-mask`); each PMD thread polls its
  CPU at 100 %, always. It must name CPUs this process may use and leave at least one of them free;
- `socket_mem`: MB per NUMA node DPDK takes at start (`dpdk-socket-mem`, and `dpdk-socket-limit`, so it
  never takes more), e.g. "512" or "1024,1024"; default: all of `hugepages_mb` on node 0. Its sum must fit in
  `hugepages_mb`;
- `pci`: PCI addresses of the physical ports the switch may take (`-a ADDR` to DPDK); none = `--no-pci`:
  DPDK then cannot grab any NIC of the machine.

Errors are `domain.errors.ValidationError` naming the field (`host.switch.dpdk.FIELD` by default).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.errors import ValidationError

WHERE = "host.switch.dpdk"
KEYS = ("hugepages_mb", "pmd_cpu_mask", "socket_mem", "pci")
HUGEPAGE_MB = 2
MAX_HUGEPAGES_MB = 1 << 20  # 1 TiB: a typo guard, not a limit of DPDK
DEFAULT_HUGEPAGES_MB = 512

_PCI_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])$"
)
_MASK_RE = re.compile(r"^(0x)?[0-9a-fA-F]{1,64}$")
_SOCKET_MEM_RE = re.compile(r"^\d{1,7}(,\d{1,7}){0,7}$")


def parse_pci_address(text: Any, where: str = f"{WHERE}.pci") -> str:
    """A PCI address `[DDDD:]BB:DD.F` in DPDK's canonical form `dddd:bb:dd.f` (lower case, domain 0000 added).

    Device 00-1f, function 0-7 (the PCI limits)."""
    m = _PCI_RE.match(text) if isinstance(text, str) else None
    if not m or int(m["dev"], 16) > 0x1F:
        raise ValidationError(where, f"{text!r} is not a PCI address DDDD:BB:DD.F (e.g. 0000:03:00.0)")
    return f"{(m['domain'] or '0000').lower()}:{m['bus'].lower()}:{m['dev'].lower()}.{m['fn']}"


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (what a PMD thread may be pinned to)."""
    return set(os.sched_getaffinity(0))


def parse_cpu_mask(text: Any, where: str = f"{WHERE}.pmd_cpu_mask", cpus: set[int] | None = None) -> set[int]:
    """The CPUs of a hex mask ("0x2", "2", "0xc"): at least one, each allowed (`cpus`, default: this process's
    affinity), and at least one allowed CPU left outside the mask (for the NFs, the VMs and the control plane:
    a PMD thread never yields its CPU)."""
    if not isinstance(text, str) or not _MASK_RE.match(text):
        raise ValidationError(where, f'{text!r} is not a hex CPU mask (e.g. "0x2" = CPU 1)')
    value = int(text, 16)
    chosen = {bit for bit in range(value.bit_length()) if value >> bit & 1}
    if not chosen:
        raise ValidationError(where, "selects no CPU")
    allowed = allowed_cpus() if cpus is None else cpus
    missing = sorted(chosen - allowed)
    if missing:
        raise ValidationError(
            where, f"CPU {missing[0]} is not one this machine lets UNO use (allowed: {_cpu_list(allowed)})"
        )
    if not allowed - chosen:
        raise ValidationError(
            where,
            f"selects every CPU UNO may use ({_cpu_list(allowed)}): each PMD thread holds its CPU at 100 %, "
            "leave at least one for the NFs, the VMs and the control plane",
        )
    return chosen


def _cpu_list(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus)) or "none"


@dataclass(frozen=True)
class DpdkOptions:
    """Validated OVS-DPDK settings; build with `DpdkOptions.parse(mapping)` or directly (then `validate()`)."""

    hugepages_mb: int = DEFAULT_HUGEPAGES_MB
    pmd_cpu_mask: str = ""  # "" = the highest allowed CPU (see `default_pmd_mask`)
    socket_mem: str = ""  # "" = all of hugepages_mb on NUMA node 0
    pci: tuple[str, ...] = ()

    @classmethod
    def parse(cls, data: Any, where: str = WHERE, cpus: set[int] | None = None) -> DpdkOptions:
        """From the config's mapping (None or {} = defaults); unknown keys are refused."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValidationError(where, f"expected a mapping with keys {', '.join(KEYS)}")
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise ValidationError(f"{where}.{unknown[0]}", f"unknown key (known: {', '.join(KEYS)})")
        hp = data.get("hugepages_mb", DEFAULT_HUGEPAGES_MB)
        pci = data.get("pci", [])
        if not isinstance(pci, list | tuple):
            raise ValidationError(f"{where}.pci", "expected a list of PCI addresses")
        opts = cls(
            hugepages_mb=hp,
            pmd_cpu_mask=data.get("pmd_cpu_mask", ""),
            socket_mem=_socket_mem_text(data.get("socket_mem", ""), f"{where}.socket_mem"),
            pci=tuple(parse_pci_address(a, f"{where}.pci[{i}]") for i, a in enumerate(pci)),
        )
        return opts.validate(where, cpus)

    def validate(self, where: str = WHERE, cpus: set[int] | None = None) -> DpdkOptions:
        """Check every field (raises ValidationError naming it); returns self with the defaults filled in."""
        hp = self.hugepages_mb
        if isinstance(hp, bool) or not isinstance(hp, int):
            raise ValidationError(f"{where}.hugepages_mb", f"expected an integer (MB), got {hp!r}")
        if not HUGEPAGE_MB <= hp <= MAX_HUGEPAGES_MB or hp % HUGEPAGE_MB:
            raise ValidationError(
                f"{where}.hugepages_mb",
                f"{hp} must be an even number of MB (2 MB pages) in 2..{MAX_HUGEPAGES_MB}",
            )
        mask = self.pmd_cpu_mask or default_pmd_mask(cpus)
        parse_cpu_mask(mask, f"{where}.pmd_cpu_mask", cpus)
        socket_mem = _socket_mem_text(self.socket_mem or str(hp), f"{where}.socket_mem")
        per_node = [int(x) for x in socket_mem.split(",")]
        if sum(per_node) > hp:
            raise ValidationError(
                f"{where}.socket_mem", f"{socket_mem} MB in all is more than hugepages_mb ({hp} MB)"
            )
        if not any(per_node):
            raise ValidationError(f"{where}.socket_mem", "gives DPDK no memory on any NUMA node")
        pci = tuple(parse_pci_address(a, f"{where}.pci[{i}]") for i, a in enumerate(self.pci))
        if len(set(pci)) != len(pci):
            raise ValidationError(f"{where}.pci", "lists an address twice")
        return DpdkOptions(hp, _canonical_mask(mask), socket_mem, pci)

    def as_dict(self) -> dict:
        """The mapping `parse` takes (what `uno up` records for a later `uno down`)."""
        return {"hugepages_mb": self.hugepages_mb, "pmd_cpu_mask": self.pmd_cpu_mask,
                "socket_mem": self.socket_mem, "pci": list(self.pci)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping) -> DpdkOptions:
        """Options as recorded by `as_dict`, taken as they are: a switch started with them is stopped with
        them, even where this machine's CPUs would no longer validate them."""
        return cls(int(data["hugepages_mb"]), str(data["pmd_cpu_mask"]), str(data["socket_mem"]),
                   tuple(data.get("pci") or ()))  # fmt: skip

    @property
    def pmd_cpus(self) -> list[int]:
        value = int(self.pmd_cpu_mask, 16)
        return [bit for bit in range(value.bit_length()) if value >> bit & 1]

    @property
    def hugepages(self) -> int:
        """Number of 2 MB pages."""
        return self.hugepages_mb // HUGEPAGE_MB

    def eal_extra(self, file_prefix: str) -> list[str]:
        """Extra EAL arguments (`dpdk-extra`): no PCI device unless listed, a private file prefix."""
        args = [f"--file-prefix={file_prefix}"]
        if self.pci:
            for addr in self.pci:
                args += ["-a", addr]
        else:
            args.append("--no-pci")
        return args

    def other_config(self, hugepage_dir: str, file_prefix: str) -> dict[str, str]:
        """The Open_vSwitch other_config keys this switch needs, set before its vswitchd starts."""
        return {
            "dpdk-init": "true",
            "dpdk-hugepage-dir": hugepage_dir,
            "dpdk-socket-mem": self.socket_mem,
            "dpdk-socket-limit": self.socket_mem,
            "pmd-cpu-mask": self.pmd_cpu_mask,
            "dpdk-extra": " ".join(self.eal_extra(file_prefix)),
        }


def default_pmd_mask(cpus: set[int] | None = None) -> str:
    """One PMD thread, on the highest CPU this process may use (CPU 0 usually takes the most interrupts)."""
    allowed = allowed_cpus() if cpus is None else cpus
    return hex(1 << max(allowed)) if allowed else "0x0"


def _canonical_mask(mask: str) -> str:
    return hex(int(mask, 16))


def _socket_mem_text(value: Any, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or (value and not _SOCKET_MEM_RE.match(value)):
        raise ValidationError(where, f'{value!r} is not MB per NUMA node, e.g. "512" or "1024,1024"')
    return value
