"""The testbed of the veth + OVS NF benchmark: a private Open vSwitch (userspace datapath) with three ports,
generator -> NF -> sink, and Redis reached from the NF's namespace as the emulated host's NFs reach it.

Namespaces (all named `<name>-...`): `-sw` runs ovs-vswitchd (docs/emulated-host.md: one netdev vswitchd per
namespace), `-gen` the traffic generator, `-nf` the NF, `-snk` the traffic sink. Each of gen/nf/snk has one
veth whose peer is a port of the bridge; OpenFlow rules steer gen (ofport 1) -> NF (2), NF -> sink (3); the NF
is one-arm (packets leave by the port they came in on). Redis runs in the root namespace on 127.0.0.1 and is
reached as the agent's NFs reach it (nf_runtime/runtime.py): over Redis's own unix socket
(`redis="unix"`, the default); `redis="relay"`: through the two socat relays the agent used before (TCP
127.0.0.1:6379 in the NF's namespace -> a unix socket -> TCP to Redis), to measure what they cost;
`redis="direct"`: Redis on the NF namespace's own loopback over TCP. The NF serves its stats endpoint on a unix
socket in the run directory, as under the agent.

`direct=True` leaves OVS out (the sNIC quota bench, bench/nfs/snic_quota.py: latency of the NF alone, not of
OVS userspace): one veth between the generator's namespace and the NF's; generator and sink share its end
(each socket ignores its own side's outgoing frames), so what the one-arm NF sends back reaches the sink.

`Testbed` is a context manager: everything it started (processes, namespaces and with them the veths, the
OVS instance, the run directory) is removed on exit, also after an exception, SIGINT or SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

from host_datapath.ovs_instance import OvsInstance
from host_datapath.sysutil import (
    DatapathError,
    free_port,
    kill_and_wait,
    netns_add,
    netns_del,
    pid_alive,
    quiet_switch_port,
    run,
    veth_pair,
    wait_for,
)
from nf_local.endpoints import http_get_unix

REDIS_PORT_IN_NS = 6379
REDIS_MODES = ("unix", "relay", "direct")
# NF pinned to CPU 0, Redis to CPU 1: the memory variant's setup (one core for the NF, the tier elsewhere).
NF_CPU, REDIS_CPU = "0", "1"
GEN_MAC, SINK_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"


class Testbed:
    """Build with `with Testbed(...) as tb:`; `tb.start_nf`, `tb.gen`, `tb.sink` run the processes."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        rundir: Path | str = "/run/uno-bench",
        redis: str = "unix",
        name: str | None = None,
        direct: bool = False,
    ):
        if redis not in REDIS_MODES:
            raise ValueError(f"redis must be one of {', '.join(REDIS_MODES)}, not {redis!r}")
        self.name = name or "nv" + uuid.uuid4().hex[:5]
        self.dir = Path(rundir) / self.name
        self.redis_mode = redis
        self.direct = direct
        self.relay_sessions: set[int] = set()
        self.ns = {k: f"{self.name}-{k}" for k in ("sw", "gen", "nf", "snk")}
        # veth ends: `<name><k>0` in the endpoint's namespace, `<name><k>1` a bridge port.
        self.ifs = {k: (f"{self.name}{k[0]}0", f"{self.name}{k[0]}1") for k in ("gen", "nf", "snk")}
        self.bridge = f"{self.name}br"
        self.ovs = OvsInstance(self.dir / "ovs", self.ns["sw"])
        if direct:  # no switch: the sink on the generator's veth end, whose peer is the NF's port
            self.ns = {"gen": self.ns["gen"], "nf": self.ns["nf"], "snk": self.ns["gen"]}
            self.ifs = {"gen": self.ifs["gen"], "nf": self.ifs["nf"], "snk": self.ifs["gen"]}
        self.procs: list[subprocess.Popen] = []
        self._old_handlers: dict[int, object] = {}

    # -- set-up / tear-down ----------------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._old_handlers[sig] = signal.signal(sig, _raise_exit)
        try:
            self.up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def up(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=False)
        for ns in set(self.ns.values()):
            netns_add(ns)
        if self.direct:
            (gen, _), (nf, _) = self.ifs["gen"], self.ifs["nf"]
            veth_pair(gen, self.ns["gen"], nf, self.ns["nf"])
            quiet_switch_port(gen, self.ns["gen"])
            quiet_switch_port(nf, self.ns["nf"])
            self._start_redis()
            return
        for k, (end, port) in self.ifs.items():
            veth_pair(end, self.ns[k], port, self.ns["sw"])
            quiet_switch_port(end, self.ns[k])
            quiet_switch_port(port, self.ns["sw"])
        self.ovs.start()
        vs = ["ovs-vsctl", f"--db={self.ovs.db_remote}", "--timeout=30"]
        run([*vs, "add-br", self.bridge, "--", "set", "bridge", self.bridge, "datapath_type=netdev",
             "other-config:disable-in-band=true", "fail_mode=secure"])  # fmt: skip
        for ofport, k in enumerate(("gen", "nf", "snk"), start=1):
            port = self.ifs[k][1]
            run(
                [
                    *vs,
                    "add-port",
                    self.bridge,
                    port,
                    "--",
                    "set",
                    "interface",
                    port,
                    f"ofport_request={ofport}",
                ]
            )
        self.ofctl("del-flows")
        for flow in ("priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:3",
                     "priority=0,actions=drop"):  # fmt: skip
            self.ofctl("add-flow", flow)
        wait_for(
            lambda: all(f"({self.ifs[k][1]})" in self.ofctl("show") for k in self.ifs), 30, "bridge ports"
        )
        self._start_redis()

    def ofctl(self, *args: str) -> str:
        return run(["ovs-ofctl", "-O", "OpenFlow13", args[0], f"unix:{self.ovs.rundir / self.bridge}.mgmt",
                    *args[1:]])  # fmt: skip

    def _spawn(self, cmd: list[str], log: Path, netns: str | None = None, **kw) -> subprocess.Popen:
        full = ["ip", "netns", "exec", netns, *cmd] if netns else cmd
        with open(log, "ab") as out:
            p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=kw.pop("stdout", out),
                                 stderr=kw.pop("stderr", out), start_new_session=True, **kw)  # fmt: skip
        self.procs.append(p)
        return p

    def _start_redis(self) -> None:
        log = self.dir / "redis.log"
        self.redis_sock = self.dir / "redis.sock"  # Redis's own unix socket (FLUSHALL, the relay's target)
        direct = self.redis_mode == "direct"
        port = REDIS_PORT_IN_NS if direct else free_port()
        self.redis_port = port  # in the NF's namespace (direct) or the root namespace
        self.redis = self._spawn(
            ["taskset", "-c", REDIS_CPU, "redis-server", "--bind", "127.0.0.1", "--port", str(port),
             "--unixsocket", str(self.redis_sock), "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir)],
            log, self.ns["nf"] if direct else None,
        )  # fmt: skip
        wait_for(lambda: self.redis_sock.exists() or not pid_alive(self.redis.pid), 20, "redis-server")
        if not pid_alive(self.redis.pid):
            raise DatapathError(f"redis-server did not start: {log.read_text()[-500:]}")
        if self.redis_mode != "relay":
            return
        relay_sock = self.dir / "redis-relay.sock"
        root = self._spawn(["socat", f"UNIX-LISTEN:{relay_sock},fork,mode=600", f"TCP:127.0.0.1:{port}"], log)
        wait_for(relay_sock.exists, 20, "redis relay (root side)")
        relay = self._spawn(
            ["socat", f"TCP-LISTEN:{REDIS_PORT_IN_NS},bind=127.0.0.1,fork,reuseaddr", f"UNIX-CONNECT:{relay_sock}"],
            log, self.ns["nf"],
        )  # fmt: skip
        want = f"0100007F:{REDIS_PORT_IN_NS:04X}"
        wait_for(lambda: want in Path(f"/proc/{relay.pid}/net/tcp").read_text(), 20, "redis relay (NF side)")
        self.relay_sessions = {root.pid, relay.pid}

    def close(self) -> None:
        """Stop everything started here; safe to call twice and after a partial `up`."""
        for p in reversed(self.procs):
            if p.poll() is None:
                kill_and_wait(p.pid)
            with contextlib.suppress(Exception):
                p.wait(timeout=5)
        self.procs.clear()
        if not self.direct:
            with contextlib.suppress(Exception):
                self.ovs.stop()
        for ns in set(self.ns.values()):
            with contextlib.suppress(Exception):
                netns_del(ns)
        shutil.rmtree(self.dir, ignore_errors=True)
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers.clear()

    # -- the state tier ----------------------------------------------------------------------------------
    def redis_flush(self) -> None:
        run(["redis-cli", "-s", str(self.redis_sock), "FLUSHALL"])

    def redis_cpu_s(self) -> float:
        return proc_cpu_s(self.redis.pid)

    def relay_cpu_s(self) -> float | None:
        """CPU seconds of the relays (`redis="relay"`): both socat and the child each forks per connection (all
        in the sessions the relays lead), the children that ended included (their time is in their parent's
        cutime/cstime once reaped, in clock ticks); None without relays."""
        if not self.relay_sessions:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for d in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):  # not a process, or it exited
                if not d.name.isdigit():
                    continue
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
                if int(f[3]) in self.relay_sessions:
                    total += proc_cpu_s(int(d.name))
                    if int(d.name) in self.relay_sessions:
                        total += (int(f[13]) + int(f[14])) / tick  # cutime + cstime: reaped children
        return total

    @property
    def store_url(self) -> str:
        if self.redis_mode == "unix":
            return f"unix://{self.redis_sock}"
        return f"redis://127.0.0.1:{REDIS_PORT_IN_NS}"

    # -- processes -----------------------------------------------------------------------------------------
    def start_nf(
        self, binary: Path, nf_type: str, store: str, config: Path, xdp: bool = False
    ) -> subprocess.Popen:
        """The NF on its veth (AF_PACKET, or AF_XDP with `xdp`), pinned to one CPU; returns once healthy."""
        log = self.dir / "nf.log"
        stats = self.dir / "nf.stats"
        p = self._spawn(
            ["taskset", "-c", NF_CPU, str(binary), nf_type, "--port", self.ifs["nf"][0], "--store", store,
             "--nf-id", f"bench-{nf_type}", "--instance", "veth", "--config", str(config),
             "--stats", f"unix://{stats}", *(["--xdp"] if xdp else [])],
            log, self.ns["nf"], stdout=subprocess.PIPE,
        )  # fmt: skip

        def healthy() -> bool:
            if p.poll() is not None:
                raise DatapathError(f"nf {nf_type} exited {p.returncode}: {log.read_text()[-500:]}")
            try:
                return http_get_unix(str(stats), "/health")[0] == 200
            except OSError:
                return False

        wait_for(healthy, 60, f"nf {nf_type} to become healthy", interval=0.1)
        return p

    def traffic(self, binary: Path, side: str, args: list[str]) -> subprocess.Popen:
        """`traffic gen|sink` on the generator's or the sink's veth (stdout piped: its JSON lines)."""
        ns, iface = (
            (self.ns["gen"], self.ifs["gen"][0]) if side == "gen" else (self.ns["snk"], self.ifs["snk"][0])
        )
        return self._spawn([str(binary), side, "--port", iface, *args], self.dir / f"{side}.log", ns,
                           stdout=subprocess.PIPE, text=True)  # fmt: skip

    def start_sink(self, binary: Path, args: list[str]) -> subprocess.Popen:
        """`traffic sink` with `args`, returned once it says it is ready (its port open)."""
        sink = self.traffic(binary, "sink", args)
        ready = sink.stdout.readline()
        if '"ready"' not in ready:
            raise RuntimeError(f"traffic sink did not start: {ready!r}")
        return sink

    def leftovers(self) -> list[str]:
        """Namespaces, links and the run directory of this testbed still present (for the cleanup test)."""
        ns = run(["ip", "netns", "list"], check=False)
        links = run(["ip", "-o", "link"], check=False)
        out = [line.split()[0] for line in ns.splitlines() if line.startswith(f"{self.name}-")]
        out += [ln.split(":")[1].strip() for ln in links.splitlines() if f" {self.name}" in ln]
        return out + ([str(self.dir)] if self.dir.exists() else [])


def proc_cpu_s(pid: int) -> float:
    """CPU seconds process `pid` has run, all its live threads (/proc/PID/task/*/schedstat: nanoseconds on
    a CPU, exact where utime/stime are 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # the thread exited meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def _raise_exit(signum, _frame) -> None:
    raise SystemExit(128 + signum)


__all__ = ["GEN_MAC", "SINK_MAC", "Testbed", "proc_cpu_s"]
