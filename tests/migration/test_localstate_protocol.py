"""The local-state move's steps and abort paths (a fake runtime that holds per-instance state: logic only;
real processes, OneSwitch and packets are in test_localstate.py)."""

from __future__ import annotations

import pytest

from domain.errors import StateError
from domain.model import Instance, Nf
from migration.localstate import LocalMoveConfig, migrate_local
from migration.protocol import MigrationError
from testkit.fakes import Clock, FakeMapper, FakeRuntime


class StateRuntime(FakeRuntime):
    """FakeRuntime plus local state per instance and a buffering flag."""

    def __init__(self):
        super().__init__()
        self.state: dict[str, bytes] = {}
        self.buffering: dict[str, int] = {}
        self.fail: set[str] = set()  # "export" | "import"

    def start(self, nf, inst, buffer: int = 0):
        super().start(nf, inst)
        self.state[inst.id] = b""
        if buffer:
            self.buffering[inst.id] = buffer

    def stats(self, inst):
        return {"counters": {"rx": 0, "buffered": 7}} if inst.id in self.running else None

    def get_state(self, inst, timeout=60.0):
        if "export" in self.fail or inst.id not in self.running:
            raise StateError(f"{inst.id}: GET /state: 503")
        return self.state[inst.id]

    def put_state(self, inst, data, timeout=60.0):
        if "import" in self.fail:
            raise StateError(f"{inst.id}: PUT /state: 400 state: magic")
        self.state[inst.id] = data
        self.buffering.pop(inst.id)
        return {"imported": 3, "replayed": 7, "buffer_overflow": 0}


def setup():
    rt, mp = StateRuntime(), FakeMapper()
    nf = Nf(id="fw", type="firewall", config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    old = Instance("fw-1", "host", "host", 200, "n-i1", "n-i1", "n-j1")
    rt.start(nf, old)
    rt.state[old.id] = b"UNOLST-flows"
    mp.map(1000, "host", 200, "fw")
    new = Instance("fw-2", "snic0", "snic0", 200, "n-i2", "n-i2", "n-j2")
    return rt, mp, nf, old, new


def test_state_moves_after_drain_then_old_stopped():
    rt, mp, nf, old, new = setup()
    clock = Clock(0.0)
    res = migrate_local(nf, [old], new, rt, mp, LocalMoveConfig(drain_timeout_s=1, buffer_packets=50),
                        clock, clock.sleep)  # fmt: skip
    assert [s.step for s in res.steps] == [
        "start", "ready", "prepare", "remap", "verify", "drain", "export", "import", "stop", "release"
    ]  # fmt: skip
    assert mp.prepared == [(1000, "snic0", 200, 5000)]  # the target's rules went in ahead
    assert rt.state["fw-2"] == b"UNOLST-flows" and "fw-2" not in rt.buffering
    assert res.state_bytes == 12 and res.replayed == 7 and res.buffer_overflow == 0 and res.drained
    assert mp.map_[1000] == ("snic0", 200) and "fw-1" not in rt.running
    assert res.to_json()["protocol"] == "local-state"


@pytest.mark.parametrize("where", ["export", "import"])
def test_state_transfer_failure_maps_back_to_the_old_instance(where):
    rt, mp, nf, old, new = setup()
    rt.fail.add(where)
    clock = Clock(0.0)
    with pytest.raises(MigrationError) as ei:
        migrate_local(nf, [old], new, rt, mp, LocalMoveConfig(drain_timeout_s=1), clock, clock.sleep)
    assert ei.value.step == where
    assert "mapped back to fw-1" in str(ei.value.result.steps[-1].detail)
    assert "7 packets queued at the target are lost" in ei.value.result.steps[-1].detail
    assert mp.map_[1000] == ("host", 200) and "fw-1" in rt.running and "fw-2" not in rt.running
    assert rt.state["fw-1"] == b"UNOLST-flows"


def test_needs_exactly_one_old_instance():
    rt, mp, nf, old, new = setup()
    with pytest.raises(ValueError):
        migrate_local(nf, [], new, rt, mp)
