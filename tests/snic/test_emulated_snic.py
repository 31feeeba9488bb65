"""The emulated sNIC as its own machine (root, real OVS, real NF processes, OneSwitch, Redis, traffic).

One emulated host for the module (one VM, snic0 with its management link and its sNIC agent). The host
reaches the sNIC only through the agent's REST API on the management address; these tests then look at the
machine from outside (/proc, the namespace files, the cgroup, the host's Redis, packets through OneSwitch):

- `uno status` names the agent at http://ADDR:PORT on the sNIC's management address; it wants the token;
- an NF started through the API is the agent's child, in the sNIC's namespace and CPU cgroup, with no path
  into the host's run directory (argv, environment, cwd, open files), its state tier over TCP;
- kill -9 of the agent alone: the NF keeps forwarding and writing its state; a restarted agent adopts it;
  DELETE removes it and its port;
- the whole sNIC killed: agent, OVS and NFs gone; `up()` brings the machine back with a new agent, which
  lists the dead instance (alive: false) until it is deleted.

After the module: `down()` leaves nothing (machine_snapshot is EMPTY) and the sNIC's directory is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost
from emulated_host.oneswitch import jar_missing_reason
from host_datapath.sysutil import kill_and_wait, pid_alive, tcp_open
from nf_local.processes import NF_BINARY
from nf_runtime.snic_client import SnicAgentClient, SnicAgentError
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name
from testkit.poll import wait
from testkit.procs import last_json

TRAFFIC = NF_BINARY.parent / "traffic"
pytestmark = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or ""),
    pytest.mark.skipif(
        not NF_BINARY.exists() or not TRAFFIC.exists(), reason="nfs not built (setup.sh rust)"
    ),
    pytest.mark.timeout(300),
]
VPORT = nm.VPORT_NF_BASE
VM_MAC, OUT_MAC = nm.mac(1, 0, 0), nm.mac(2, 0, 0)
# testkit/testbed.py's firewall: new connections only from the VM (its state: in the host's Redis).
FW_CONFIG = {
    "rules": [{"action": "allow", "proto": "udp", "src": f"{nm.ip_vm(0)}/32", "dst": "any"}],
    "default": "deny",
}


def report(p: subprocess.Popen, timeout: float) -> dict:
    """The last JSON line a traffic process printed (waits for it to exit)."""
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0 and "{" in out, f"traffic exited {p.returncode}: {err.strip()[-300:]}"
    return last_json(out)


@dataclass
class Bed:
    host: EmulatedHost
    status: dict
    runs: list[int]

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def access(self):
        return self.host.snic_agents()["snic0"]

    def client(self, token: str | None = None) -> SnicAgentClient:
        a = self.access
        return SnicAgentClient("snic0", a.agent, a.token if token is None else token, timeout=30)

    @property
    def store(self) -> str:
        return f"redis://{self.access.state_addr}:{self.status['redis']['port']}"

    def redis(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.status["redis"]["port"], socket_timeout=5)

    def start(self, inst_id: str) -> dict:
        body = {"id": inst_id, "nf_id": "fw", "type": "firewall", "config": FW_CONFIG, "store": self.store}
        return self.client().start(body)

    def delete(self, inst_id: str) -> None:
        with contextlib.suppress(SnicAgentError):
            self.client().stop(inst_id)

    def agent_pid(self) -> int:
        pid = self.host.snic("snic0").agent_pid()
        assert pid, "the sNIC agent does not run"
        return pid

    # -- packets: VM -> OneSwitch vport -> the NF on snic0 -> the wire -------------------------------------
    def steer(self, ofport: int) -> None:
        """OneSwitch maps VPORT to the NF's port on snic0; the VM's frames go to it, and back from it to the
        wire (a one-arm NF)."""
        self.host.oneswitch().client().map_port(VPORT, "snic0", ofport, name="fw")
        vm, eth = nm.vport_vm(0), nm.vport_eth(0, 0)
        self.ofctl("del-flows")
        self.ofctl("add-flow", f"in_port={vm},actions=output:{VPORT}")
        self.ofctl("add-flow", f"in_port={VPORT},dl_src={VM_MAC},actions=output:{eth}")

    def unsteer(self) -> None:
        with contextlib.suppress(Exception):
            self.ofctl("del-flows")
        with contextlib.suppress(Exception):
            self.host.oneswitch().client().unmap_port(VPORT)

    def ofctl(self, *args: str) -> None:
        listen = self.status["oneswitch"]["listen"]
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", args[0], listen, *args[1:]], check=True,
                       capture_output=True, timeout=30)  # fmt: skip

    def burst(self, dst_port: int, pkts: int = 50) -> dict:
        """`pkts` UDP packets of one new flow from the VM to the wire; the sink's report."""
        run = 100 + len(self.runs)
        self.runs.append(run)
        n = self.name
        sink = subprocess.Popen(
            ["ip", "netns", "exec", nm.ns_outside(n, 0, 0), str(TRAFFIC), "sink", "--port", nm.if_eth(n, 0, 0)[1],
             "--run", str(run), "--idle-ms", "1500", "--duration-ms", "20000", "--expect", str(pkts)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        gen = None
        try:
            line = sink.stdout.readline()
            assert '"ready"' in line, f"traffic sink did not start: {line!r}"
            gen = subprocess.Popen(
                ["ip", "netns", "exec", nm.ns_vm(n, 0), str(TRAFFIC), "gen", "--port", nm.if_vm(n, 0)[0], "--udp",
                 "--run", str(run), "--flows", "1", "--pkts", str(pkts), "--rate", "500", "--size", "64",
                 "--src", nm.ip_vm(0), "--dst", nm.ip_outside(0, 0), "--src-mac", VM_MAC, "--dst-mac", OUT_MAC,
                 "--dst-port", str(dst_port)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            report(gen, timeout=60)
            return report(sink, timeout=60)
        finally:
            for p in (gen, sink):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait(timeout=10)


@pytest.fixture(scope="module")
def bed():
    host = EmulatedHost(parse_config({"name": unique_name(), "rundir": "/run/uno-test", "vms": 1}))
    disks = host.snic_disks
    try:
        status = host.up()
        yield Bed(host, status, [])
    finally:
        host.down()
        assert machine_snapshot(host.name) == EMPTY
        assert not disks.exists(), f"the sNIC's directory {disks} is left"


@pytest.fixture
def inst(bed):
    """Instance ids a test starts; each is deleted afterwards (pass or fail), and OneSwitch unsteered."""
    ids: list[str] = []
    yield ids
    bed.unsteer()
    for i in ids:
        bed.delete(i)


# -- /proc -----------------------------------------------------------------------------------------------------
def ppid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def same_netns(pid: int, netns: str) -> bool:
    a, b = os.stat(f"/proc/{pid}/ns/net"), os.stat(f"/run/netns/{netns}")
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def fd_links(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def socket_inodes(pid: int) -> set[int]:
    return {int(x[len("socket:[") : -1]) for x in fd_links(pid) if x.startswith("socket:[")}


def unix_paths(pid: int) -> dict[int, str]:
    """Unix sockets of `pid`'s network namespace: inode -> bound path ("" unnamed)."""
    out = {}
    for line in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
        f = line.split()
        out[int(f[6])] = f[7] if len(f) > 7 else ""
    return out


def tcp_conns(pid: int) -> dict[int, tuple[tuple[str, int], tuple[str, int], str]]:
    """IPv4 TCP sockets of `pid`'s network namespace: inode -> (local, remote, state hex)."""

    def addr(h: str) -> tuple[str, int]:
        ip, port = h.split(":")
        return socket.inet_ntoa(bytes.fromhex(ip)[::-1]), int(port, 16)

    out = {}
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        out[int(f[9])] = (addr(f[1]), addr(f[2]), f[3])
    return out


def no_path_into(pid: int, rundir: Path) -> list[str]:
    """Everything of process `pid` that names `rundir` (argv, environment, cwd, open files, bound unix
    sockets); [] when there is none."""
    r = str(rundir)
    found = []
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    found += [f"argv: {a}" for a in argv if r in a]
    env = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    found += [f"env: {e}" for e in env if r in e]
    cwd = os.readlink(f"/proc/{pid}/cwd")
    found += [f"cwd: {cwd}"] if r in cwd else []
    found += [f"fd: {x}" for x in fd_links(pid) if r in x]
    socks, unix = socket_inodes(pid), unix_paths(pid)
    found += [f"unix socket: {unix[i]}" for i in socks if r in unix.get(i, "")]
    return found


def reap(pid: int) -> None:
    """Wait for `pid` to end (and reap it if it is this process's child: the emulation started it)."""
    wait(lambda: not pid_alive(pid), 10, f"process {pid} to end")
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


# -- the tests ----------------------------------------------------------------------------------------------------
def test_status_names_the_agent_on_the_management_address_and_it_wants_the_token(bed):
    sn = bed.host.status()["snics"][0]
    url = urllib.parse.urlsplit(sn["agent"])
    assert (url.scheme, url.hostname) == ("http", sn["mgmt"]["snic_ip"]) and url.port, sn["agent"]
    assert f"http://{url.hostname}:{url.port}" == sn["agent"] == bed.access.agent
    assert bed.access.state_addr == sn["mgmt"]["host_ip"]
    # The management address is the sNIC's, not one of the host's (root namespace) addresses.
    host_addrs = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    assert f" {url.hostname}/" not in host_addrs
    apid = bed.agent_pid()
    assert sn["agent_pid"] == apid
    assert same_netns(apid, nm.ns_snic(bed.name, 0))
    assert no_path_into(apid, bed.host.rundir) == []

    h = bed.client().health()
    assert h["ok"] is True and h["snic"] == "snic0" and h["boot_id"]
    for token in ("", "wrong-token-12345", bed.access.token + "x"):
        with pytest.raises(SnicAgentError) as exc:
            bed.client(token).health()
        assert exc.value.status == 401 and exc.value.field == "Authorization"
    with pytest.raises(SnicAgentError) as exc:
        bed.client("wrong-token-12345").instances()
    assert exc.value.status == 401


def test_nf_runs_on_the_snic_as_the_agents_child_with_no_path_into_the_host(bed, inst):
    inst.append("fw-a")
    view = bed.start("fw-a")
    pid, apid = view["pid"], bed.agent_pid()
    assert view["alive"] is True and view["state"] == "running" and pid_alive(pid)
    assert ppid(pid) == apid, "the NF is not the sNIC agent's child"
    snic_ns = nm.ns_snic(bed.name, 0)
    assert same_netns(pid, snic_ns), "the NF is not in the sNIC's network namespace"
    cg = bed.host.snic("snic0").cgroup
    for d in cg.dirs():
        assert pid in {int(x) for x in (d / "cgroup.procs").read_text().split()}, f"NF not in {d}"

    assert no_path_into(pid, bed.host.rundir) == []
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    assert argv[argv.index("--store") + 1] == bed.store  # redis://ADDR:PORT, never unix://
    # ... and it uses it: a TCP connection from the sNIC to the host's end of the management link
    redis_port, state_addr = bed.status["redis"]["port"], bed.access.state_addr
    conns = tcp_conns(pid)
    mine = [conns[i] for i in socket_inodes(pid) if i in conns]
    assert any(remote == (state_addr, redis_port) and st == "01" for _, remote, st in mine), mine
    clients = bed.redis().client_list()
    snic_ip = bed.status["snics"][0]["mgmt"]["snic_ip"]
    assert any(c["addr"].startswith(f"{snic_ip}:") for c in clients), clients
    assert not [c for c in clients if c["addr"].startswith("/")], "a client on the host's unix socket"

    st = bed.client().nf("fw-a", "GET", "stats")
    assert st["instance"] == "fw-a" and st["nf"] == "firewall" and st["store_kind"] == "redis"
    ports = {p["name"]: p for p in bed.client().ports()}
    assert ports[view["port_if"]]["kind"] == "nf" and ports[view["port_if"]]["ofport"] == view["ofport"]


def test_agent_killed_alone_the_nf_keeps_forwarding_and_a_new_agent_adopts_it(bed, inst):
    inst.append("fw-b")
    view = bed.start("fw-b")
    pid = view["pid"]
    bed.steer(view["ofport"])
    r = bed.redis()
    keys0 = r.dbsize()
    assert bed.burst(6001)["received"] == 50
    wait(lambda: r.dbsize() > keys0, 5, "the NF's state in the host's Redis")
    # its port's packet counters, as its switch counts them (tx: into the NF, rx: out of it)
    [listed] = [v for v in bed.client().instances(counters=True) if v["id"] == "fw-b"]
    one = bed.client().instance("fw-b", counters=True)
    assert listed["counters"]["tx_packets"] >= 50 and one["counters"]["tx_packets"] >= 50, (listed, one)
    assert "counters" not in bed.client().instance("fw-b")  # only when asked (a port-stats dump each)
    # the bridge's counters in one dump with the time of the read on the sNIC's own clock (the host rates
    # them over the sNIC's interval, not over a round trip to it)
    first, second = bed.client().port_counters(), bed.client().port_counters()
    assert first["counters"][view["port_if"]]["tx_packets"] >= 50 and second["t"] > first["t"] > 0, first
    assert set(first["counters"]) == {p["name"] for p in bed.client().ports()}
    old_boot = bed.client().health()["boot_id"]

    apid = bed.agent_pid()
    os.kill(apid, signal.SIGKILL)
    reap(apid)
    snic_ip = bed.status["snics"][0]["mgmt"]["snic_ip"]
    wait(lambda: not tcp_open(urllib.parse.urlsplit(bed.access.agent).port, snic_ip), 5, "the agent gone")
    with pytest.raises(SnicAgentError) as exc:
        bed.client().health()
    assert exc.value.status == 0  # no answer at all

    # Without its agent the NF keeps forwarding and keeps writing its per-flow state to the host's Redis.
    assert pid_alive(pid)
    keys1 = r.dbsize()
    assert bed.burst(6002)["received"] == 50
    wait(lambda: r.dbsize() > keys1, 5, "the NF's writes to Redis while its agent is dead")
    assert pid_alive(pid)

    bed.host.snic("snic0").start_agent()
    new_pid = bed.agent_pid()
    assert new_pid != apid
    c = bed.client()
    assert c.health()["boot_id"] != old_boot
    listed = {v["id"]: v for v in c.instances()}
    assert listed["fw-b"]["pid"] == pid and listed["fw-b"]["alive"] is True
    assert listed["fw-b"]["state"] == "running"
    out = (bed.host.snic("snic0").rundir / "agent.out").read_text()
    assert f"adopted fw-b (pid {pid})" in out
    assert c.nf("fw-b", "GET", "stats")["nf_stats"]["opened"] >= 2  # the same process, its counters kept
    assert bed.burst(6003)["received"] == 50  # still forwarding under the new agent

    bed.unsteer()
    assert c.stop("fw-b") is None
    inst.remove("fw-b")
    wait(lambda: not pid_alive(pid), 10, "the NF to end after DELETE")
    assert "fw-b" not in {v["id"] for v in c.instances()}
    assert view["port_if"] not in {p["name"] for p in c.ports()}


def test_an_nf_that_dies_is_seen_and_restarted_in_place(bed, inst):
    inst.append("fw-e")
    view = bed.start("fw-e")
    c = bed.client()
    os.kill(view["pid"], signal.SIGKILL)
    got = wait(lambda: (v := c.instance("fw-e"))["state"] == "dead" and v, 10, "the agent to see the exit")
    assert got["alive"] is False
    again = c.start_processes("fw-e")
    assert again["alive"] is True and again["pid"] != view["pid"]
    assert (again["ofport"], again["port_if"]) == (view["ofport"], view["port_if"])
    assert ppid(again["pid"]) == bed.agent_pid()


def test_heartbeat_carries_beats_and_the_exit_of_an_nf(bed, inst):
    """What the host's SnicWatch lives on: a beat each interval_ms with the agent's boot_id, and an NF's
    exit on the stream at once.

    state "dead" (alive false), and DELETE leaves other processes alone."""
    inst.append("fw-r")
    bed.start("fw-r")
    sn = bed.host.snic("snic0")
    sn.kill()
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        state = sn.agent_dir / "instances.json"
        data = json.loads(state.read_text())
        data["instances"]["fw-r"]["instance"]["pid"] = sleeper.pid
        state.write_text(json.dumps(data))
        sn.up()
        c = bed.client()
        v = c.instance("fw-r")
        c.stop("fw-r")
        inst.remove("fw-r")
        time.sleep(0.2)
        assert sleeper.poll() is None, "DELETE killed a process that is not the instance's NF"
        assert (v["state"], v["alive"]) == ("dead", False)
    finally:
        if sleeper.poll() is None:
            kill_and_wait(sleeper.pid)
        sleeper.wait(timeout=5)
