"""Warm NF slots with real namespaces, bridge ports and NF processes (root; nf_local/slots.py,
HostRuntime): the host's pool fills (a slot runs no process) and so does the sNIC agent's (its own, on the
sNIC), a new instance takes a slot (create, migration, failover) and runs only `nf` in it (on the host Redis
and its stats endpoint on unix sockets; on the sNIC Redis over TCP), the pools refill, a failed start or slot
creation leaves nothing, a restarted agent removes the slots of the one before, closing the pool releases
every free slot; kill -9 under a stream fails over into a slot with the connection opened before still
passing; an agent for a Redis without a unix socket starts NFs through its one relay."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.errors import StartError
from domain.model import Nf
from emulated_host import agent_endpoint
from host_datapath.sysutil import kill_and_wait, netns_list, netns_pids, pid_alive
from nf_local.processes import SLOT_PORT_BASE
from nf_local.slots import SlotPool
from nf_runtime.runtime import HostRuntime
from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS, burst, kill_under_load
from testkit.poll import wait
from testkit.testbed import EST_PORT, Testbed

pytestmark = LIVE_MARKS
FULL = {"host": 1}  # the host's pool; the sNIC's slots are its agent's


def snic_slots(tb: Testbed) -> list[dict]:
    """snic0's free slots, as its agent's port listing shows them."""
    return [p for p in tb.runtime.remote["snic0"].client.ports() if p["kind"] == "slot"]


def pools_full(tb: Testbed) -> bool:
    return tb.runtime.pool.counts() == FULL and len(snic_slots(tb)) == 1


@pytest.fixture(scope="module")
def bed():
    tb = Testbed(store="redis", drain_s=0.5, warm_slots=1)
    try:
        tb.up()
        wait(lambda: pools_full(tb), 60, "the pools filled")
        tb.add_firewall(at="host")
        yield tb
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


def free_slots(tb: Testbed):
    return [s for loc in tb.runtime.pool.free.values() for s in loc]


def slot_files(tb: Testbed) -> list[str]:
    return sorted(p.name for p in tb.runtime.local.slot_dir.glob("*.json"))


def host_ports(tb: Testbed) -> dict[str, int]:
    return tb.runtime.local.switches["host"].driver.ports()


def assert_slot_live(tb: Testbed, slot) -> None:
    assert slot.netns in netns_list()
    assert host_ports(tb)[slot.port_if] == slot.ofport >= SLOT_PORT_BASE
    assert netns_pids(slot.netns) == []  # nothing runs in a slot (no relays any more)


def own_leftovers(tb: Testbed, location: str) -> dict:
    """What a slot at `location` can leave behind, looked up only among this host's own objects (the machine
    is shared: other hosts make and remove namespaces meanwhile): namespaces and root links named for this
    host, the ports of its bridge at `location`, and its slot files."""
    snap = machine_snapshot(tb.name)
    ports = tb.runtime.local.switches[location].driver.ports()
    return {"netns": snap["netns"], "links": snap["links"], "ports": ports, "files": slot_files(tb)}


def nf_arg(pid: int, flag: str) -> str:
    """The value of `flag` on process `pid`'s command line."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return argv[argv.index(flag) + 1]


def assert_only_nf_runs(tb: Testbed, inst) -> None:
    """On the host the instance's namespace runs its `nf` and nothing else; it reaches Redis's own unix
    socket and serves its stats endpoint on the agent's unix socket path. On the sNIC its agent runs it (in
    the sNIC's namespace) and it reaches Redis over TCP at the host's management address."""
    assert inst.relay_pids == []
    if inst.location == "host":
        assert netns_pids(inst.netns) == [inst.pid]
        assert nf_arg(inst.pid, "--store") == f"unix://{tb.host.rundir / 'redis.sock'}"
        assert nf_arg(inst.pid, "--stats") == f"unix://{tb.runtime.dir / (inst.id + '.stats')}"
    else:
        store = tb.runtime.remote[inst.location].store
        assert store.startswith("redis://") and nf_arg(inst.pid, "--store") == store
    assert tb.runtime.stats(inst)["store"]["round_trips"] > 0


def test_instances_take_slots_and_the_pool_refills(bed):
    nf = bed.agent.state.nfs["fw"]
    inst = nf.instances[0]
    assert inst.netns.startswith(f"{bed.name}-w") and inst.ofport >= SLOT_PORT_BASE  # create took one
    assert_only_nf_runs(bed, inst)
    assert not (bed.runtime.dir / "redis-relay.pid").exists()  # Redis has a unix socket: no relay
    wait(lambda: pools_full(bed), 60, "refill after the create")
    for s in free_slots(bed):
        assert_slot_live(bed, s)
        assert s.netns != inst.netns
    assert slot_files(bed) == sorted(f"{s.key}.json" for s in free_slots(bed))
    assert burst(bed, "vm", EST_PORT)["received"] == 50
    # a migration to the sNIC takes the sNIC agent's slot; the old instance (in a former slot) is released
    slot = snic_slots(bed)[0]
    bed.agent.migrate(nf, "snic0")
    new = nf.instances[0]
    assert new.location == "snic0" and (new.port_if, new.ofport) == (slot["name"], slot["ofport"])
    assert_only_nf_runs(bed, new)
    assert inst.netns not in netns_list()
    assert bed.agent.mapper.mapped()[nf.vport] == ("snic0", new.ofport)
    assert burst(bed, "out", EST_PORT)["received"] == 50  # the connection (state in Redis) still passes
    wait(lambda: pools_full(bed), 60, "refill after the migration")
    bed.agent.migrate(nf, "host")
    assert nf.instances[0].location == "host"
    wait(lambda: pools_full(bed), 60, "refill")


def test_kill9_fails_over_into_a_slot_without_breaking_connections(bed):
    wait(lambda: pools_full(bed), 60, "the pools filled")
    assert burst(bed, "vm", EST_PORT)["received"] == 50
    taken = bed.runtime.pool.taken
    ev, got = kill_under_load(bed)
    new = bed.agent.state.nfs["fw"].instances[0]
    assert bed.runtime.pool.taken == taken + 1 and new.netns.startswith(f"{bed.name}-w")
    assert ev["start_ms"] > 0 and not ev["used_standby"] and got["received"] > 0
    assert burst(bed, "out", EST_PORT)["received"] == 50  # 0 broken connections


def test_failed_start_in_a_slot_and_failed_slot_creation_leave_nothing(bed, monkeypatch):
    rt = bed.runtime
    wait(lambda: pools_full(bed), 60, "the pools filled")
    slot = rt.pool.free["host"][0]
    bogus = Nf(id="bad", type="no-such-nf", config={}, vport=0, expected_gbps=0.1, src=None, dst=None)
    inst = rt.new_instance(bogus, "host", 9000, set())
    with pytest.raises(StartError):
        rt.start(bogus, inst)  # nf exits at once: everything the slot had is removed with the instance
    assert inst.netns == slot.netns and slot.netns not in netns_list()
    assert slot.port_if not in host_ports(bed)
    assert f"{slot.key}.json" not in slot_files(bed)
    wait(lambda: pools_full(bed), 60, "refill after the failed start")
    # a slot that fails once its namespace and port exist: they and its file are removed again
    before = own_leftovers(bed, "host")
    sw = rt.local.switches["host"]
    attach = sw.attach_namespace

    def attach_then_fail(*a, **k):
        attach(*a, **k)
        raise StartError("injected: failure after the attach")

    monkeypatch.setattr(sw, "attach_namespace", attach_then_fail)
    with pytest.raises(StartError):
        rt.local.create_slot("host")
    monkeypatch.undo()
    assert own_leftovers(bed, "host") == before
    assert slot_files(bed) == sorted(f"{s.key}.json" for s in free_slots(bed))


def test_a_restarted_agent_removes_the_previous_slots_then_close_releases_all(bed):
    rt = bed.runtime
    wait(lambda: pools_full(bed), 60, "the pools filled")
    assert burst(bed, "vm", EST_PORT)["received"] == 50
    rt.pool.stop()  # the agent "dies": no more refills, its free slots and their files stay behind
    old = free_slots(bed)
    assert len(old) == 1 and slot_files(bed) == sorted(f"{s.key}.json" for s in old)
    adir = agent_endpoint.agent_dir(bed.host.rundir)
    redis = bed.host.status()["redis"]
    again = HostRuntime(bed.host, adir, redis["port"], warm_slots=0, redis_socket=redis["unix_socket"])
    try:
        again.open()  # removes the stale slots
    finally:
        assert again.close() == []
    for s in old:
        assert s.netns not in netns_list()
        assert s.port_if not in host_ports(bed)
    assert slot_files(bed) == []
    # the running NF was not touched
    assert rt.alive(bed.agent.state.nfs["fw"].instances[0])
    assert burst(bed, "out", EST_PORT)["received"] == 50
    # a new pool fills again; closing it releases every free slot and stops refilling
    rt.local.pool = SlotPool(rt.local.create_slot, rt.local.destroy_slot, ["host"], 1).start()
    wait(lambda: rt.pool.counts() == FULL, 60, "refill")
    live = free_slots(bed)
    assert rt.pool.close() == []
    for s in live:
        assert s.netns not in netns_list()
    assert slot_files(bed) == [] and rt.pool.take("host") is None


def test_without_a_redis_socket_nfs_go_through_the_agents_relay(bed, tmp_path):
    """A Redis started without a unix socket (a host brought up by an older version): the agent opens its one
    relay (unix socket -> TCP to Redis, root namespace) and the NF reaches Redis through it."""
    redis = bed.host.status()["redis"]
    rt = HostRuntime(bed.host, tmp_path, redis["port"], warm_slots=0, redis_socket=None)
    fw = Nf(
        id="fw-relay", type="firewall", config={"rules": []}, vport=0, expected_gbps=0.1, src=None, dst=None
    )
    inst = rt.new_instance(fw, "host", 9100, set(bed.agent.state.used_ofports("host")))
    try:
        rt.open()
        assert pid_alive(rt.redis_relay) and rt.redis_sock.exists()
        rt.start(fw, inst)
        assert nf_arg(inst.pid, "--store") == f"unix://{tmp_path / 'redis.sock'}"
        wait(lambda: (rt.stats(inst) or {}).get("store", {}).get("round_trips", 0) > 0, 10, "a round trip")
        assert netns_pids(inst.netns) == [inst.pid]
    finally:
        rt.stop(inst)
        assert rt.close() == []
        if rt.redis_relay:
            kill_and_wait(rt.redis_relay)
    assert inst.netns not in netns_list()
