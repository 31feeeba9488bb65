"""Warm NF slots with real namespaces, bridge ports, relays and NF processes (root; nf_agent/agent/slots.py,
HostRuntime): the pool fills per location, a new instance takes a slot (create, migration, failover), the
pool refills, a failed start or slot creation leaves nothing, a restarted agent removes the slots of the one
before, closing the pool releases every free slot; kill -9 under a stream fails over into a slot with the
connection opened before still passing."""

from __future__ import annotations

import pytest

from host_datapath.sysutil import netns_list, pid_alive
from migration.testbed import EST_PORT, Testbed
from nf_agent.agent import endpoint
from nf_agent.agent.model import Nf
from nf_agent.agent.runtime import SLOT_PORT_BASE, HostRuntime, StartError
from nf_agent.agent.slots import SlotPool
from tests.datapath.conftest import EMPTY, machine_snapshot
from tests.migration.live import LIVE_MARKS
from tests.migration.test_live import burst, kill_under_load, wait

pytestmark = LIVE_MARKS
FULL = {"host": 1, "snic0": 1}


@pytest.fixture(scope="module")
def bed():
    tb = Testbed(store="redis", drain_s=0.5, warm_slots=1)
    try:
        tb.up()
        wait(lambda: tb.runtime.pool.counts() == FULL, 60, "the pool filled")
        tb.add_firewall(at="host")
        yield tb
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


def free_slots(tb: Testbed):
    return [s for loc in tb.runtime.pool.free.values() for s in loc]


def slot_files(tb: Testbed) -> list[str]:
    return sorted(p.name for p in tb.runtime.slot_dir.glob("*.json"))


def assert_slot_live(tb: Testbed, slot) -> None:
    assert slot.netns in netns_list()
    assert tb.runtime.switches[slot.location].driver.ports()[slot.port_if] == slot.ofport >= SLOT_PORT_BASE
    assert all(pid_alive(p) for p in slot.relay_pids) and len(slot.relay_pids) == 2


def test_instances_take_slots_and_the_pool_refills(bed):
    nf = bed.agent.state.nfs["fw"]
    inst = nf.instances[0]
    assert inst.netns.startswith(f"{bed.name}-w") and inst.ofport >= SLOT_PORT_BASE  # create took one
    wait(lambda: bed.runtime.pool.counts() == FULL, 60, "refill after the create")
    for s in free_slots(bed):
        assert_slot_live(bed, s)
        assert s.netns != inst.netns
    assert slot_files(bed) == sorted(f"{s.key}.json" for s in free_slots(bed))
    assert burst(bed, "vm", EST_PORT)["received"] == 50
    # a migration to the sNIC takes the sNIC's slot; the old instance (in a former slot) is released
    taken = bed.runtime.pool.taken
    bed.agent.migrate(nf, "snic0")
    new = nf.instances[0]
    assert new.location == "snic0" and new.netns.startswith(f"{bed.name}-w")
    assert bed.runtime.pool.taken == taken + 1 and inst.netns not in netns_list()
    assert bed.agent.mapper.mapped()[nf.vport] == ("snic0", new.ofport)
    assert burst(bed, "out", EST_PORT)["received"] == 50  # the connection (state in Redis) still passes
    wait(lambda: bed.runtime.pool.counts() == FULL, 60, "refill after the migration")
    bed.agent.migrate(nf, "host")
    assert nf.instances[0].location == "host"
    wait(lambda: bed.runtime.pool.counts() == FULL, 60, "refill")


def test_kill9_fails_over_into_a_slot_without_breaking_connections(bed):
    wait(lambda: bed.runtime.pool.counts() == FULL, 60, "the pool filled")
    assert burst(bed, "vm", EST_PORT)["received"] == 50
    taken = bed.runtime.pool.taken
    ev, got = kill_under_load(bed)
    new = bed.agent.state.nfs["fw"].instances[0]
    assert bed.runtime.pool.taken == taken + 1 and new.netns.startswith(f"{bed.name}-w")
    assert ev["start_ms"] > 0 and not ev["used_standby"] and got["received"] > 0
    assert burst(bed, "out", EST_PORT)["received"] == 50  # 0 broken connections


def test_failed_start_in_a_slot_and_failed_slot_creation_leave_nothing(bed, monkeypatch):
    rt = bed.runtime
    wait(lambda: rt.pool.counts() == FULL, 60, "the pool filled")
    slot = rt.pool.free["host"][0]
    bogus = Nf(id="bad", type="no-such-nf", config={}, vport=0, expected_gbps=0.1, src=None, dst=None)
    inst = rt.new_instance(bogus, "host", 9000, set())
    with pytest.raises(StartError):
        rt.start(bogus, inst)  # nf exits at once: everything the slot had is removed with the instance
    assert inst.netns == slot.netns and slot.netns not in netns_list()
    assert slot.port_if not in rt.switches["host"].driver.ports()
    assert not any(pid_alive(p) for p in slot.relay_pids)
    assert f"{slot.key}.json" not in slot_files(bed)
    wait(lambda: rt.pool.counts() == FULL, 60, "refill after the failed start")
    # a slot whose relays do not start: its namespace, port and file are removed again
    before = set(netns_list())

    def no_relays(*_a, **_k):
        raise StartError("injected: relay did not start")

    monkeypatch.setattr(rt, "_spawn_relays", no_relays)
    with pytest.raises(StartError):
        rt.create_slot("snic0")
    monkeypatch.undo()
    assert set(netns_list()) == before
    assert slot_files(bed) == sorted(f"{s.key}.json" for s in free_slots(bed))


def test_a_restarted_agent_removes_the_previous_slots_then_close_releases_all(bed):
    rt = bed.runtime
    wait(lambda: rt.pool.counts() == FULL, 60, "the pool filled")
    assert burst(bed, "vm", EST_PORT)["received"] == 50
    rt.pool.stop()  # the agent "dies": no more refills, its free slots and their files stay behind
    old = free_slots(bed)
    assert len(old) == 2 and slot_files(bed) == sorted(f"{s.key}.json" for s in old)
    adir = endpoint.agent_dir(bed.host.rundir)
    again = HostRuntime(bed.host, adir, bed.host.status()["redis"]["port"], warm_slots=0)
    try:
        again.open()  # adopts the Redis relay, removes the stale slots
    finally:
        assert again.close() == []
    for s in old:
        assert s.netns not in netns_list() and not any(pid_alive(p) for p in s.relay_pids)
        assert s.port_if not in rt.switches[s.location].driver.ports()
    assert slot_files(bed) == []
    # the running NF was not touched
    assert rt.alive(bed.agent.state.nfs["fw"].instances[0])
    assert burst(bed, "out", EST_PORT)["received"] == 50
    # a new pool fills again; closing it releases every free slot and stops refilling
    rt.pool = SlotPool(rt.create_slot, rt.destroy_slot, rt.locations(), 1).start()
    wait(lambda: rt.pool.counts() == FULL, 60, "refill")
    live = free_slots(bed)
    assert rt.pool.close() == []
    for s in live:
        assert s.netns not in netns_list() and not any(pid_alive(p) for p in s.relay_pids)
    assert slot_files(bed) == [] and rt.pool.take("host") is None
