"""The agent's persisted state: VMs, NFs (with instances), virtual-port allocation, placement history.

One JSON file, written atomically (temp file + fsync + rename), so a crash leaves the old or the new state,
never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from domain.model import Instance, Nf, Vm

HISTORY_MAX = 100
VERSION = 1


@dataclass
class AgentState:
    vms: dict[str, Vm] = field(default_factory=dict)
    nfs: dict[str, Nf] = field(default_factory=dict)
    next_nf: int = 1
    next_instance: int = 1
    history: list[dict] = field(default_factory=list)  # placement decisions and migrations, newest last
    table_pins: dict[int, str] = field(default_factory=dict)  # OneSwitch table -> where an operator pinned it
    # pinned table -> the host_min_priority of an operator's split on its pinned sNIC (OneSwitch's split)
    table_splits: dict[int, int] = field(default_factory=dict)

    # -- allocation (pure) -------------------------------------------------------------------------------
    def used_vports(self) -> set[int]:
        return {v.vport for v in self.vms.values()} | {n.vport for n in self.nfs.values()}

    def free_vport(self, base: int) -> int:
        used = self.used_vports()
        v = base
        while v in used:
            v += 1
        return v

    def used_ofports(self, switch: str) -> set[int]:
        return {i.ofport for n in self.nfs.values() for i in n.instances if i.switch == switch}

    def new_nf_id(self) -> str:
        while f"nf{self.next_nf}" in self.nfs:
            self.next_nf += 1
        return f"nf{self.next_nf}"

    def new_instance_seq(self) -> int:
        seq = self.next_instance
        self.next_instance += 1
        return seq

    def record(self, entry: dict) -> None:
        self.history.append(entry)
        del self.history[:-HISTORY_MAX]

    # -- (de)serialisation ------------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "version": VERSION,
            "vms": {k: asdict(v) for k, v in self.vms.items()},
            "nfs": {k: asdict(n) for k, n in self.nfs.items()},
            "next_nf": self.next_nf,
            "next_instance": self.next_instance,
            "history": self.history,
            "table_pins": {str(k): v for k, v in sorted(self.table_pins.items())},
            "table_splits": {str(k): v for k, v in sorted(self.table_splits.items())},
        }

    @classmethod
    def from_json(cls, data: dict) -> AgentState:
        if data.get("version") != VERSION:
            raise ValueError(f"state version {data.get('version')!r} is not {VERSION}")
        nfs = {}
        for k, raw in data["nfs"].items():
            insts = [Instance(**i) for i in raw.pop("instances", [])]
            nfs[k] = Nf(**raw, instances=insts)
        return cls(
            vms={k: Vm(**v) for k, v in data["vms"].items()},
            nfs=nfs,
            next_nf=data["next_nf"],
            next_instance=data["next_instance"],
            history=list(data.get("history", [])),
            table_pins={int(k): str(v) for k, v in data.get("table_pins", {}).items()},
            table_splits={int(k): int(v) for k, v in data.get("table_splits", {}).items()},
        )


def save(state: AgentState, path: Path) -> None:
    """Write `state` to `path` atomically (its directory must exist: a removed host is not re-created)."""
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(state.to_json(), f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path) -> AgentState:
    """The state saved at `path`, or an empty state when there is none. A corrupt file raises ValueError."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return AgentState()
    try:
        return AgentState.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"agent state {path}: unreadable ({exc})") from None
