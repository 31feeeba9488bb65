"""The state tier as a Redis Cluster (root; real redis-server processes, OneSwitch, `nf` processes, packets).

- `uno up` with `redis.mode: cluster` starts masters x (1 + replicas) nodes joined by redis-cli; status
  names each node's role; the default user needs the admin password; `down` leaves no node running.
- NFs on the host and on the sNIC keep their flow state in the cluster under `tn:<tenant>:` and get their
  tenant's ACL user: a tenant's user is refused (NOPERM) on another tenant's keys, on every node.
- a master killed with SIGKILL: its replica takes over, the flow's state is still served, `uno up` starts
  the dead node again and it rejoins as a replica.
- bad input: an operator's tier that does not answer, without a master, refusing the credentials: one line
  naming the key, nothing started.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
import redis

from domain.errors import CliError
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost
from host_datapath.sysutil import free_port, free_ports, pid_alive
from state_tier.access import Credentials, node_client, tier_client
from state_tier.acl import tenant_password, tenant_user
from state_tier.topology import split_address
from testkit.hosts import EMPTY, machine_snapshot, needs_root
from testkit.live import LIVE_MARKS, burst
from testkit.poll import wait
from testkit.testbed import EST_PORT, Testbed

CLUSTER = {"mode": "cluster", "masters": 3, "replicas": 1}


def live(f):
    for mark in LIVE_MARKS:
        f = mark(f)
    return f


@pytest.fixture(scope="module")
def bed():
    tb = Testbed(rundir="/run/uno-test", redis=CLUSTER)
    pids: list[int] = []
    try:
        tb.up()
        pids = [n["pid"] for n in tb.host.status()["redis"]["nodes"]]
        tb.add_firewall(at="host")
        yield tb
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY
        assert not [p for p in pids if p and pid_alive(p)], "a cluster node outlived `uno down`"


def _admin(tb: Testbed) -> Credentials:
    return tb.host.tier().admin


@live
def test_status_names_every_node_and_its_role_and_the_tier_needs_a_password(bed):
    st = bed.host.status()["redis"]
    assert st["mode"] == "cluster" and st["running"]
    roles = sorted(n["role"] for n in st["nodes"])
    assert roles == ["master"] * 3 + ["replica"] * 3, st["nodes"]
    assert all(n["pid"] and not n["failed"] for n in st["nodes"])
    assert st["url"].startswith("redis-cluster://")
    host, port = split_address(st["nodes"][0]["address"])
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=host, port=port, socket_timeout=2).ping()  # no password: refused
    assert oct(os.stat(st["password_file"]).st_mode & 0o777) == "0o600"


@live
def test_flow_state_lives_in_the_cluster_under_the_tenant_prefix_host_and_snic(bed):
    assert burst(bed, "vm", EST_PORT)["received"] == 50  # opens the connection (state written)
    assert burst(bed, "out", EST_PORT)["received"] == 50  # the reply passes on that state
    c = tier_client(bed.host.tier().component.topology(), _admin(bed))
    try:
        keys = [k.decode() for k in c.scan_iter("tn:*", count=1000)]
    finally:
        c.close()
    assert any(k.startswith("tn:default:nf:fw:{") and k.endswith("}:fw") for k in keys), keys
    assert not [k for k in keys if not k.startswith("tn:default:")], keys
    nf = bed.agent.state.nfs["fw"]
    bed.agent.migrate(nf, "snic0")  # the sNIC's NFs reach the cluster over its management link
    try:
        assert burst(bed, "out", EST_PORT)["received"] == 50
    finally:
        bed.agent.migrate(nf, "host")


@live
def test_a_tenants_user_is_refused_on_another_tenants_keys_on_every_node(bed):
    users = bed.runtime.users
    user_a, pw_a = users.credentials("ta")
    users.credentials("tb")
    assert user_a == tenant_user("ta") and pw_a == tenant_password(_admin(bed), "ta")
    topo = bed.host.tier().component.topology()
    for n in topo.nodes:  # ACL users are per server: on every master and replica
        c = node_client(n.address, _admin(bed))
        try:
            assert c.execute_command("ACL", "GETUSER", "tn-ta") is not None, n
            assert c.execute_command("ACL", "GETUSER", "tn-tb") is not None, n
        finally:
            c.close()
    a = tier_client(topo, Credentials(user_a, pw_a))
    try:
        a.set("tn:ta:nf:x:{1}:t", b"mine")
        assert a.get("tn:ta:nf:x:{1}:t") == b"mine"
        for op in (lambda: a.get("tn:tb:nf:x:{1}:t"), lambda: a.set("tn:tb:nf:x:{1}:t", b"theirs"),
                   lambda: a.get("tn:default:nf:fw:{timers}")):  # fmt: skip
            # NoPermissionError is the server's NOPERM answer (redis-py maps the error code to the class)
            with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions"):
                op()
        with pytest.raises(redis.exceptions.NoPermissionError):
            a.execute_command("FLUSHALL", target_nodes="all")  # no admin or dangerous commands
    finally:
        a.close()


@live
def test_an_nf_with_one_tenants_credentials_cannot_use_anothers_keys(bed):
    """The NF process itself: tenant tb's keys (`--tenant tb`) with tenant ta's user: the tier answers NOPERM
    to the NF's access check at start, the NF exits and the start fails naming it; nothing lands in tb's
    keys. The instance then starts again with its own tenant's credentials."""
    from domain.errors import ConfigRejected, StartError
    from nf_local.tier_access import TierAccess

    nf = bed.agent.state.nfs["fw"]
    inst = nf.instances[0]
    user_a, pw_a = bed.runtime.users.credentials("ta")
    url = bed.runtime.local.store
    bed.runtime.local.stop_processes(inst)
    bed.runtime.local.stores[inst.id] = TierAccess(url, "tb", user_a, pw_a)
    try:
        with pytest.raises((StartError, ConfigRejected), match="NOPERM"):
            bed.runtime.local.start_processes(nf, inst)
        c = tier_client(bed.host.tier().component.topology(), _admin(bed))
        try:
            assert not list(c.scan_iter("tn:tb:*", count=1000))
        finally:
            c.close()
    finally:
        bed.runtime.local.stop_processes(inst)
        bed.runtime.local.stores[inst.id] = bed.runtime.tier_access(nf, "host")
        bed.runtime.local.start_processes(nf, inst)
    assert burst(bed, "vm", EST_PORT)["received"] == 50


@live
def test_a_killed_master_fails_over_and_its_node_rejoins_on_up(bed):
    assert burst(bed, "vm", EST_PORT)["received"] == 50
    st = bed.host.status()["redis"]
    c = tier_client(bed.host.tier().component.topology(), _admin(bed))
    try:  # the master serving the connection's record
        key = next(k for k in c.scan_iter("tn:default:nf:fw:{*}:fw", count=1000))
        owner = c.get_node_from_key(key)
    finally:
        c.close()
    victim = next(n for n in st["nodes"] if n["address"] == f"{owner.host}:{owner.port}")
    assert victim["role"] == "master"
    os.kill(victim["pid"], signal.SIGKILL)

    def promoted() -> bool:
        topo = bed.host.tier().component.topology()
        if topo is None:
            return False
        gone = all(n.failed or n.role != "master" for n in topo.nodes if n.address == victim["address"])
        return gone and sum(1 for n in topo.nodes if n.role == "master" and not n.failed) == 3

    wait(promoted, 30, "its replica promoted", interval=0.2)
    # the connection's state, served by the new master once the NF's client follows the promotion (the
    # fail-closed window meanwhile is the bench's master_failover_ms); a lost record would never pass again
    wait(
        lambda: burst(bed, "out", EST_PORT)["received"] == 50, 30, "the connection passing again", interval=0
    )
    assert not bed.host.is_up()
    bed.host.up()  # only the dead node starts again; it rejoins as a replica
    back = lambda: any(n["address"] == victim["address"] and n["role"] == "replica" and not n["failed"]  # noqa: E731
                       for n in bed.host.status()["redis"]["nodes"])  # fmt: skip
    try:
        wait(back, 60, f"the old master {victim['address']} back as a replica", interval=0.5)
    except AssertionError:
        port = victim["address"].rsplit(":", 1)[1]
        tail = (bed.host.rundir / "tier" / port / "redis.log").read_text()[-3000:]
        raise AssertionError(f"{bed.host.status()['redis']['nodes']}\n{tail}") from None
    assert bed.host.is_up()
    assert burst(bed, "out", EST_PORT)["received"] == 50


# -- bad input: an operator's tier ------------------------------------------------------------------------------
def _external(tmp_path, nodes, **extra) -> EmulatedHost:
    cfg = {"name": "sx" + os.urandom(2).hex()[:3], "rundir": str(tmp_path / "run"), "oneswitch": {"enabled": False},
           "redis": {"mode": "external", "nodes": nodes, **extra}}  # fmt: skip
    return EmulatedHost(parse_config(cfg))


@pytest.fixture
def servers(tmp_path):
    """A Redis with a password and its replica (real redis-server processes)."""
    procs, ports = [], free_ports(2)
    (tmp_path / "pw").write_text("right-password\n")
    try:
        for i, port in enumerate(ports):
            args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--dir", str(tmp_path), "--requirepass", "right-password", "--masterauth", "right-password"]  # fmt: skip
            if i == 1:
                args += ["--replicaof", "127.0.0.1", str(ports[0])]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
        for port in ports:
            wait(lambda p=port: _answers(p), 20, f"redis on {port}")
        yield ports
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def _answers(port: int) -> bool:
    try:
        return redis.Redis(port=port, password="right-password", socket_timeout=1).ping()
    except redis.RedisError:
        return False


@needs_root
def test_external_tier_bad_input_is_one_line_naming_the_key_and_nothing_starts(tmp_path, servers):
    master, replica = servers
    (tmp_path / "bad").write_text("wrong-password\n")
    cases = [
        (_external(tmp_path, [f"127.0.0.1:{free_port()}"], password_file=str(tmp_path / "pw")),
         "config: redis.nodes: no seed node answers"),
        (_external(tmp_path, [f"127.0.0.1:{replica}"], password_file=str(tmp_path / "pw")),
         "config: redis.nodes: "),
        (_external(tmp_path, [f"127.0.0.1:{master}"], password_file=str(tmp_path / "bad")),
         "config: redis.password_file: "),
        (_external(tmp_path, [f"127.0.0.1:{master}"]), "config: redis.password_file: "),
        (_external(tmp_path, [f"127.0.0.1:{master}"], user="nobody", password_file=str(tmp_path / "pw")),
         "config: redis."),
    ]  # fmt: skip
    for host, want in cases:
        with pytest.raises(CliError) as err:
            host.up()
        msg = str(err.value)
        assert msg.startswith(want) and "\n" not in msg, msg
        assert not host.rundir.exists() and machine_snapshot(host.name)["netns"] == []
    assert "replica" in str(pytest.raises(CliError, cases[1][0].up).value)


@needs_root
def test_external_single_redis_is_accepted_and_reported(tmp_path, servers):
    master, _ = servers
    host = _external(tmp_path, [f"127.0.0.1:{master}"], password_file=str(tmp_path / "pw"))
    try:
        host.up()
        st = host.status()["redis"]
        assert st["mode"] == "external" and st["url"] == f"redis://127.0.0.1:{master}"
        assert st["nodes"] == [{"address": f"127.0.0.1:{master}", "role": "master", "failed": False}]
        assert host.is_up()
    finally:
        host.down()
    assert _answers(master)  # the operator's Redis: not ours to stop
    assert not host.rundir.exists()
