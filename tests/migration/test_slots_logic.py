"""Warm slot pool logic (nf_local/slots.py) on fakes: the refill decision, take/refill/close, failures.
The same pool with real namespaces, relays and NFs: tests/migration/test_slots.py."""

from __future__ import annotations

import threading
import time

import pytest

from nf_local.slots import Slot, SlotPool, missing
from testkit.poll import wait


def test_missing_fills_every_location_emptiest_first():
    assert missing({}, ["host", "snic0"], 1) == ["host", "snic0"]
    assert missing({"host": 1, "snic0": 0}, ["host", "snic0"], 1) == ["snic0"]
    assert missing({"host": 1, "snic0": 0}, ["host", "snic0"], 2) == ["snic0", "host"]
    assert missing({"host": 1, "snic0": 1}, ["host", "snic0"], 1) == []
    assert missing({}, ["host"], 0) == []


class Fake:
    def __init__(self, fail: set[str] = frozenset()):
        self.fail, self.n, self.live, self.lock = set(fail), 0, {}, threading.Lock()

    def create(self, loc: str) -> Slot:
        if loc in self.fail:
            raise RuntimeError(f"no room at {loc}")
        with self.lock:
            self.n += 1
            s = Slot(self.n, loc, f"x-w{self.n}", f"x-w{self.n}", f"x-x{self.n}", 700 + self.n)
            self.live[s.key] = s
        return s

    def destroy(self, slot: Slot) -> None:
        with self.lock:
            self.live.pop(slot.key, None)


def test_take_refill_close_leaves_nothing():
    f = Fake()
    pool = SlotPool(f.create, f.destroy, ["host", "snic0"], per_domain=1, refill_delay_s=0.01).start()
    try:
        wait(lambda: pool.counts() == {"host": 1, "snic0": 1})
        s = pool.take("host")
        assert s is not None and s.location == "host" and pool.counts()["host"] == 0
        assert pool.take("host") is None  # none free until the refill
        pool.refill()
        wait(lambda: pool.counts()["host"] == 1)
        assert pool.taken == 1 and pool.created == 3
    finally:
        assert pool.close() == []
    assert list(f.live) == [s.key]  # only the taken one (the caller's) remains
    assert pool.counts() == {"host": 0, "snic0": 0}
    assert pool.take("snic0") is None


def test_several_per_location_are_all_built_without_a_take():
    """per_domain 3: the pool fills to 3 at each location at start, and back to 3 after takes, from one
    refill (not one slot per refill)."""
    f = Fake()
    pool = SlotPool(f.create, f.destroy, ["host", "snic0"], per_domain=3, refill_delay_s=0.01).start()
    try:
        wait(lambda: pool.counts() == {"host": 3, "snic0": 3})
        taken = [pool.take("host") for _ in range(3)]
        assert None not in taken and pool.take("host") is None
        pool.refill()
        wait(lambda: pool.counts() == {"host": 3, "snic0": 3})
        assert pool.created == 9
    finally:
        assert pool.close() == []


def test_disabled_pool_creates_nothing():
    f = Fake()
    pool = SlotPool(f.create, f.destroy, ["host"], per_domain=0).start()
    assert pool.take("host") is None and pool._thread is None
    assert pool.close() == [] and f.n == 0
    with pytest.raises(ValueError):
        SlotPool(f.create, f.destroy, ["host"], per_domain=-1)


def test_a_failing_location_is_retried_and_does_not_block_the_others():
    f = Fake(fail={"snic0"})
    pool = SlotPool(f.create, f.destroy, ["host", "snic0"], per_domain=1, retry_s=0.02).start()
    try:
        wait(lambda: pool.failures >= 2)  # retried after retry_s, not given up
        assert pool.counts() == {"host": 1, "snic0": 0}
        f.fail.clear()
        wait(lambda: pool.counts()["snic0"] == 1)
    finally:
        pool.close()
    assert f.live == {}


def test_close_during_a_create_destroys_that_slot():
    f = Fake()
    started, release = threading.Event(), threading.Event()

    def slow_create(loc: str) -> Slot:
        started.set()
        release.wait(5)
        return f.create(loc)

    pool = SlotPool(slow_create, f.destroy, ["host"], per_domain=1).start()
    started.wait(5)
    closer = threading.Thread(target=pool.close)
    closer.start()
    time.sleep(0.05)
    release.set()
    closer.join(10)
    assert f.n == 1 and f.live == {} and pool.counts() == {"host": 0}


def test_slot_json_roundtrip():
    s = Slot(3, "snic0", "h-w3", "h-w3", "h-x3", 702)
    assert Slot.from_json(s.to_json()) == s
    # a file an older agent wrote (its slots ran relays) still reads
    old = {**s.to_json(), "stats_sock": "/run/a/3.stats", "relay_pids": [11, 12]}
    assert Slot.from_json(old) == s
