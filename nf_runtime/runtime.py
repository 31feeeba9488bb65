"""NF instances as real processes on a running emulated host (the I/O edge of the lifecycle).

Each instance gets a network namespace `NAME-iSEQ` plugged into its switch (host or sNIC bridge) as OpenFlow
port >= 200, and runs `nf TYPE --port IFACE ...` there. The namespace is cut off from the root namespace's
loopback, but not from the file system: the NF reaches Redis through Redis's own unix socket
(`--store unix://RUNDIR/redis.sock`) and serves its stats endpoint on a unix socket in the agent's directory
(`--stats unix://AGENT_DIR/ID.stats`), so no relay runs next to it: a relay would add wake-ups and copies
to every round trip, inside the sNIC's CPU quota for sNIC NFs. Only a Redis without a unix socket is reached
through one relay in the root namespace: the agent's unix socket -> TCP to Redis. On an sNIC the NF process
joins the sNIC's CPU cgroup before it executes, so none of its CPU time is charged to the host
(command.spawn_command).

Warm slots (`warm_slots` per location, nf_runtime/slots.py): namespaces `NAME-wK` already plugged into
their switch (ofport >= SLOT_PORT_BASE); `start` takes one when its location has one free and then only
starts `nf` and waits for /health. Slot files `slots/K.json` in the agent directory are written before a
slot's resources are made and removed when it is taken or destroyed, so `open()` removes what a previous
agent left (crash included) and `uno down` sweeps the rest by name.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
import time
from pathlib import Path

from domain.errors import ConfigRejected, StartError, StateError
from domain.model import HOST, Instance, Nf
from emulated_host import naming as nm
from emulated_host.naming import MAX_UNIX_PATH
from host_datapath.sysutil import (
    DatapathError,
    kill_and_wait,
    netns_del,
    netns_exists,
    netns_list,
    netns_pids,
    pid_alive,
    process_argv,
    read_pidfile,
)
from nf_runtime.command import MAX_CPU_LATENCY_US, run_config, spawn_command
from nf_runtime.slots import Slot, SlotPool
from nf_runtime.unixhttp import http_get_unix, http_unix, redis_ping

REPO_ROOT = Path(__file__).resolve().parents[1]
NF_BINARY = REPO_ROOT / "nfs" / "target" / "release" / "nf"
HEALTH_TIMEOUT = 30.0
SLOT_PORT_BASE = 700  # warm slots' OpenFlow ports (instances allocate from NF_PORT_BASE = 200 up)


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])


class HostRuntime:
    """Starts, supervises and stops NF instances on the running emulated host `host`."""

    def __init__(
        self,
        host,
        agent_dir: Path,
        redis_port: int,
        nf_binary: Path = NF_BINARY,
        store: str = "redis",
        warm_slots: int = 0,
        redis_socket: str | Path | None = None,
        cpu_latency_us: int | None = None,
    ):
        """`store`: "redis" (the stateless mode, state in the host's Redis) or "local" (in-process state:
        the baseline that shows what a failover loses). `warm_slots`: free pre-created slots kept per
        location (0 = none; the agent's `--warm-slots`, default 1). `redis_socket`: Redis's own unix socket
        (the host status's `redis.unix_socket`); None: Redis is reached by TCP on `redis_port` through the
        agent's relay. `cpu_latency_us`: see `run_config` (None: NFs leave the host's idle states alone)."""
        if store not in ("redis", "local"):
            raise ValueError(f"store must be 'redis' or 'local', not {store!r}")
        if not 0 <= warm_slots <= 8:
            raise ValueError(f"warm_slots must be in [0, 8], not {warm_slots!r}")
        if cpu_latency_us is not None and not 0 <= cpu_latency_us <= MAX_CPU_LATENCY_US:
            raise ValueError(f"cpu_latency_us must be in [0, {MAX_CPU_LATENCY_US}], not {cpu_latency_us!r}")
        self.cpu_latency_us = cpu_latency_us
        self.store = store
        self.host = host  # EmulatedHost
        self.name = host.name
        self.dir = agent_dir
        self.redis_port = redis_port
        self.nf_binary = nf_binary
        self.switches = host.switches()  # "host", "snic0", ... with .driver / .attach_namespace / .cgroup
        self.procs: dict[int, subprocess.Popen] = {}
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.redis_socket = Path(redis_socket) if redis_socket else None
        self.redis_sock = self.dir / "redis.sock"  # the relay's socket (no `redis_socket`)
        self.redis_relay: int | None = None
        self.slot_dir = self.dir / "slots"
        self.pool = SlotPool(self.create_slot, self.destroy_slot, self.locations(), warm_slots)
        self._slot_lock = threading.Lock()  # slot names and ports (the refill thread vs cleanup)
        self._slot_seq = 0  # next warm slot key (see create_slot)
        self.last_start: dict = {}  # step times of the last `start` (profiling; bench/migration)

    # -- agent-wide ------------------------------------------------------------------------------------
    def open(self) -> None:
        """Check Redis's unix socket, or (a Redis without one) start the Redis relay, or adopt the one a
        previous agent left running; remove the warm slots a previous agent left; start filling the pool.

        A relay outlives the agent on purpose: running NFs keep their state tier while the agent restarts.
        `uno down` removes it with the host (its command line names the host's rundir). One left by an
        older agent stays up too when Redis has a unix socket: the instances that agent started use it.
        """
        if not self.nf_binary.exists():
            raise StartError(f"NF binary {self.nf_binary} not built (run `scripts/setup.sh rust`)")
        sock = self.store_socket()
        if len(str(sock)) > MAX_UNIX_PATH:
            raise StartError(f"Redis socket path {sock} is longer than {MAX_UNIX_PATH} bytes")
        if self.redis_socket is None:
            self._open_redis_relay()
        elif not self.redis_socket.exists():
            raise StartError(f"Redis's unix socket {self.redis_socket} does not exist (is the host up?)")
        self.clean_stale_slots()
        for sw in self.switches.values():  # connect OVSDB here, not racing the refill thread's first use
            with contextlib.suppress(Exception):
                getattr(sw.driver, "api", None)
        self.pool.start()

    def _open_redis_relay(self) -> None:
        pidfile = self.dir / "redis-relay.pid"
        pid = read_pidfile(pidfile)
        if pid and self.redis_sock.exists():
            self.redis_relay = pid
            return
        if pid:
            kill_and_wait(pid)
        self.redis_sock.unlink(missing_ok=True)
        self.redis_relay = self._spawn(
            ["socat", f"UNIX-LISTEN:{self.redis_sock},fork,mode=600", f"TCP:127.0.0.1:{self.redis_port}"],
            self.dir / "logs" / "redis-relay.log",
        )
        pidfile.write_text(str(self.redis_relay))
        deadline = time.monotonic() + 10
        while not self.redis_sock.exists():
            if time.monotonic() > deadline or not pid_alive(self.redis_relay):
                raise StartError(f"redis relay did not start: {_tail(self.dir / 'logs' / 'redis-relay.log')}")
            time.sleep(0.02)

    def store_socket(self) -> Path:
        """The unix socket NFs reach Redis on: its own, else the agent's relay."""
        return self.redis_socket if self.redis_socket is not None else self.redis_sock

    def close(self) -> list[str]:
        """Destroy the free warm slots and drop OVSDB connections; NF processes and the Redis relay (if any)
        keep running (see `open`). Returns the slot cleanup errors."""
        errors = self.pool.close()
        for sw in self.switches.values():
            with contextlib.suppress(Exception):
                sw.close()
        return errors

    # -- warm slots -----------------------------------------------------------------------------------
    def _slot_file(self, key: int) -> Path:
        return self.slot_dir / f"{key}.json"

    def create_slot(self, location: str) -> Slot:
        """A new warm slot at `location`: namespace + veth + bridge port (no NF, not mapped). Its slot file is
        written first, so a crash half-way is cleaned up by the next `open`."""
        with self._slot_lock:
            if not self.dir.exists():  # `uno down` removed the host: build nothing it would not sweep
                raise StartError(f"agent directory {self.dir} is gone (host down)")
            self.slot_dir.mkdir(parents=True, exist_ok=True)
            # Keys only grow (also past the names instances took over): a released slot's namespace name
            # does not come back at once as a new slot (observers would take it for a leftover).
            pat = re.compile(rf"^{re.escape(self.name)}-w(\d+)$")
            used = [int(m.group(1)) for ns in netns_list() if (m := pat.match(ns))]
            key = max([self._slot_seq, *(k + 1 for k in used)])
            while self._slot_file(key).exists():
                key += 1
            self._slot_seq = key + 1
            sw = self.switches[location]
            taken = set(sw.driver.ports().values())
            ofport = SLOT_PORT_BASE
            while ofport in taken:
                ofport += 1
            slot = Slot(
                key, location, f"{self.name}-w{key}", f"{self.name}-w{key}", f"{self.name}-x{key}", ofport
            )
            self._slot_file(key).write_text(json.dumps(slot.to_json()))
        try:
            sw.attach_namespace(slot.netns, slot.inside_if, slot.port_if, slot.ofport)
            if not self._slot_file(key).exists():  # `uno down` ran meanwhile: it sweeps by name, we raise
                raise StartError(f"slot {slot.netns}: agent directory removed while it was made")
        except BaseException:
            with contextlib.suppress(Exception):
                self.destroy_slot(slot)
            raise
        return slot

    def destroy_slot(self, slot: Slot) -> None:
        """Remove a slot that no instance took: its processes, bridge port, namespace and file (idempotent)."""
        for pid in netns_pids(slot.netns):
            kill_and_wait(pid)
            p = self.procs.pop(pid, None)
            if p is not None:
                with contextlib.suppress(Exception):
                    p.wait(timeout=1)
        if not netns_exists(slot.netns):
            # never made, or swept with its veth by `uno down` (whose switches may be gone: no OVSDB call)
            self._slot_file(slot.key).unlink(missing_ok=True)
            return
        errors = self._unplug(slot.location, slot.port_if, slot.netns)
        self._slot_file(slot.key).unlink(missing_ok=True)
        if errors:
            raise DatapathError(f"removing slot {slot.netns}: " + "; ".join(errors))

    def clean_stale_slots(self) -> list[str]:
        """Destroy the free slots a previous agent left (their files); returns the errors."""
        errors = []
        for f in sorted(self.slot_dir.glob("*.json")) if self.slot_dir.exists() else []:
            try:
                slot = Slot.from_json(json.loads(f.read_text()))
                if slot.location not in self.switches:
                    raise KeyError(slot.location)
            except (OSError, ValueError, TypeError, KeyError) as exc:
                errors.append(f"{f.name}: unreadable slot file ({exc}); removed")
                f.unlink(missing_ok=True)
                continue
            try:
                self.destroy_slot(slot)
            except DatapathError as exc:
                errors.append(str(exc))
        return errors

    def _take_slot(self, inst: Instance) -> bool:
        """Move a free slot at the instance's location under `inst` (its names and port)."""
        slot = self.pool.take(inst.switch)
        while slot is not None and not netns_exists(slot.netns):
            # swept while it waited (an operator, a crashed bring-up): drop it, try the next (or start cold)
            with contextlib.suppress(Exception):
                self.destroy_slot(slot)
            slot = self.pool.take(inst.switch)
        if slot is None:
            return False
        self._slot_file(slot.key).unlink(missing_ok=True)  # the instance owns it now (stop() removes it)
        inst.netns, inst.inside_if, inst.port_if, inst.ofport = (
            slot.netns, slot.inside_if, slot.port_if, slot.ofport,
        )  # fmt: skip
        return True

    def locations(self) -> list[str]:
        return [HOST] + sorted(k for k in self.switches if k != HOST)

    # -- one instance ---------------------------------------------------------------------------------------
    def new_instance(self, nf: Nf, location: str, seq: int, used_ofports: set[int]) -> Instance:
        """Allocate names and an OpenFlow port for a new instance of `nf` at `location` (no side effects)."""
        return Instance(
            id=f"{nf.id}-{seq}",
            location=location,
            switch=location,
            ofport=self.free_ofport(location, used_ofports),
            netns=f"{self.name}-i{seq}",
            inside_if=f"{self.name}-i{seq}",
            port_if=f"{self.name}-j{seq}",
        )

    def free_ofport(self, location: str, used_ofports: set[int]) -> int:
        """The lowest OpenFlow port from NF_PORT_BASE up that neither an instance (`used_ofports`) nor any port
        on the switch has (warm slots take theirs from SLOT_PORT_BASE up, so the two ranges do not race)."""
        taken = set(used_ofports) | set(self.switches[location].driver.ports().values())
        ofport = nm.NF_PORT_BASE
        while ofport in taken:
            ofport += 1
        return ofport

    def plugged(self, inst: Instance) -> bool:
        """The instance's namespace exists and its port is on its switch as its OpenFlow port: a dead NF
        process can be restarted in place (`start_processes`), nothing needs to be freed and taken again."""
        if not netns_exists(inst.netns):
            return False
        return self.switches[inst.switch].driver.ports().get(inst.port_if) == inst.ofport

    def _files(self, inst: Instance) -> dict[str, Path]:
        return {
            "config": self.dir / f"{inst.id}.json",
            "stats": self.dir / f"{inst.id}.stats",
            "log": self.dir / "logs" / f"{inst.id}.log",
        }

    def start(self, nf: Nf, inst: Instance, buffer: int = 0) -> None:
        """Plug the instance's namespace into its switch and start its processes; wait for /health.
        `buffer` > 0: the NF starts in buffering mode (`nf --buffer`), queueing up to that many packets
        until its state arrives (`put_state`, local store) or it is released (`release`, state in the tier).

        With a warm slot free at the instance's location the instance takes it (its netns, interfaces and
        ofport become the slot's) and only `nf` starts here. Cold, `nf` is spawned as soon as its veth
        exists, so its own start-up (mostly the AF_PACKET ring's set-up, which waits for an RCU grace period)
        overlaps the bridge port's OVSDB transaction and vswitchd's set-up of the port.
        On any failure everything this call created (or took) is removed again and StartError is raised.
        `last_start` keeps the step times of the last call (ms: attach (nf spawn included), nf_spawn, health
        (from the spawn: it overlaps attach when cold), total).
        """
        t0 = time.monotonic()
        self.last_start = {"slot": False}
        spawned: list[float] = []
        try:
            if self._take_slot(inst):
                self.last_start["slot"] = True
                spawned.append(self.spawn_nf(nf, inst, buffer))
            else:
                self.switches[inst.switch].attach_namespace(
                    inst.netns, inst.inside_if, inst.port_if, inst.ofport,
                    on_veth=lambda: spawned.append(self.spawn_nf(nf, inst, buffer)),
                )  # fmt: skip
                self.last_start["attach_ms"] = round((time.monotonic() - t0) * 1000, 2)
            self.await_nf(inst, spawned[0])
            self.last_start["total_ms"] = round((time.monotonic() - t0) * 1000, 2)
        except BaseException as exc:
            self.stop(inst)
            if isinstance(exc, StartError):
                raise
            if isinstance(exc, DatapathError | OSError):
                raise StartError(f"{inst.id}: {exc}") from None
            raise
        finally:
            self.pool.refill()  # after this start (a no-op when the pool is full or disabled)

    def _cgroup_files(self, location: str) -> list[str]:
        if location == HOST:
            return []
        return [str(d / "cgroup.procs") for d in self.switches[location].cgroup.dirs()]

    def _spawn(self, cmd: list[str], log: Path, netns: str | None = None, cgroup: list[str] = ()) -> int:
        """Start `cmd` (its own session, output to `log`) in namespace `netns`, in the cgroups whose
        `cgroup.procs` files `cgroup` lists, which it joins before it executes.

        No code runs in a fork of the agent (CPython then starts the child with vfork: a fork of the agent
        costs ms of page-table copying), and the call returns at once: `sh` joins the cgroups (a cgroup
        write waits for an RCU grace period: not on the agent's thread), then `nsenter --net` enters the
        namespace and executes `cmd` (same PID throughout). `ip netns exec` would also remount /sys, which
        the NF does not read (Redis and its stats endpoint are unix sockets in
        the file system it shares with the agent). A failed cgroup write ends `sh` (exit 126, message in
        `log`) before `cmd` runs."""
        with open(log, "ab") as out:
            p = subprocess.Popen(
                spawn_command(cmd, netns, cgroup),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        self.procs[p.pid] = p
        return p.pid

    def config_files(self, nf: Nf, inst: Instance) -> None:
        self._files(inst)["config"].write_text(
            json.dumps(run_config(nf.type, nf.config, inst.location, self.cpu_latency_us))
        )

    def start_processes(self, nf: Nf, inst: Instance, buffer: int = 0) -> None:
        """(Re)start the instance's processes in its existing namespace: its config file, then `nf` (the
        supervisor's restart in place after the NF died; a socket file it left is replaced); wait for
        /health."""
        self.await_nf(inst, self.spawn_nf(nf, inst, buffer))

    def spawn_nf(self, nf: Nf, inst: Instance, buffer: int = 0) -> float:
        """Write the instance's config file and spawn `nf` in its namespace (Redis and its stats endpoint on
        unix sockets); returns the monotonic time the spawn returned (see `await_nf`)."""
        f = self._files(inst)
        if len(str(f["stats"])) > MAX_UNIX_PATH:
            raise StartError(
                f"{inst.id}: stats socket path {f['stats']} is longer than {MAX_UNIX_PATH} bytes"
            )
        self.config_files(nf, inst)
        cg = self._cgroup_files(inst.location)
        t0 = time.monotonic()
        store = f"unix://{self.store_socket()}" if self.store == "redis" else "local"
        try:
            inst.pid = self._spawn(
                [str(self.nf_binary), nf.type, "--port", inst.inside_if,
                 "--store", store, "--nf-id", nf.id, "--instance", inst.id,
                 "--config", str(f["config"]), "--stats", f"unix://{f['stats']}",
                 *(["--buffer", str(buffer)] if buffer > 0 else [])],
                f["log"], inst.netns, cg,
            )  # fmt: skip
        except (OSError, ValueError, subprocess.SubprocessError) as exc:  # no namespace, cgroup gone, ...
            raise StartError(f"{inst.id}: cannot start nf in namespace {inst.netns}: {exc}") from None
        inst.state = "starting"
        t1 = time.monotonic()
        self.last_start["nf_spawn_ms"] = round((t1 - t0) * 1000, 2)
        return t1

    def await_nf(self, inst: Instance, spawned_at: float) -> None:
        """Wait until the `nf` spawned at `spawned_at` answers /health (then `running`; else StartError)."""
        self.wait_healthy(inst)
        inst.state = "running"
        self.last_start["health_ms"] = round((time.monotonic() - spawned_at) * 1000, 2)

    def wait_healthy(self, inst: Instance, timeout: float = HEALTH_TIMEOUT) -> None:
        f = self._files(inst)
        deadline = time.monotonic() + timeout
        while True:
            if not inst.pid or not pid_alive(inst.pid):
                code = self._exit_code(inst.pid)
                self.stop_processes(inst)
                tail = _tail(f["log"])
                if code == 2 and "nf: config: " in tail:
                    raise ConfigRejected(tail[tail.rindex("nf: config: ") + len("nf: config: ") :])
                raise StartError(f"{inst.id}: NF process exited: {tail}")
            if self.healthy(inst):
                return
            if time.monotonic() > deadline:
                self.stop_processes(inst)
                raise StartError(f"{inst.id}: not healthy after {timeout:g}s: {_tail(f['log'])}")
            time.sleep(0.003)  # on the failover path (no standby): every ms counts (a probe is ~1 ms)

    def store_reachable(self, timeout: float = 0.5) -> bool | None:
        """Whether the state tier answers a PING on the socket the NFs use (None: NFs keep local state)."""
        if self.store == "local":
            return None
        return redis_ping(self.store_socket(), timeout)

    def healthy(self, inst: Instance, timeout: float = 1.0) -> bool:
        """GET /health answered 200 within `timeout` s (short for the failover watchdog's probes)."""
        try:
            status, _ = http_get_unix(str(self._files(inst)["stats"]), "/health", timeout=timeout)
        except OSError:
            return False
        return status == 200

    def stats(self, inst: Instance) -> dict | None:
        try:
            status, body = http_get_unix(str(self._files(inst)["stats"]), "/stats", timeout=1.0)
            return json.loads(body) if status == 200 else None
        except (OSError, ValueError):
            return None

    def _state_call(
        self, inst: Instance, method: str, path: str, body: bytes | None, timeout: float
    ) -> bytes:
        """`method path` on the instance's stats endpoint; its body when it answers 200, else StateError
        naming the instance, the call and the answer."""
        what = f"{inst.id}: {method} {path}"
        try:
            status, answer = http_unix(str(self._files(inst)["stats"]), method, path, body, timeout)
        except OSError as exc:
            raise StateError(f"{what}: {exc}") from None
        if status != 200:
            raise StateError(f"{what}: {status} {answer[:200].decode(errors='replace')}")
        return answer

    def _state_call_json(self, inst: Instance, method: str, path: str, body: bytes, timeout: float) -> dict:
        try:
            return json.loads(self._state_call(inst, method, path, body, timeout))
        except ValueError:
            raise StateError(f"{inst.id}: {method} {path}: answer is not JSON") from None

    def get_state(self, inst: Instance, timeout: float = 60.0) -> bytes:
        """The instance's serialised per-flow state (`GET /state`; local store only). Raises StateError."""
        return self._state_call(inst, "GET", "/state", None, timeout)

    def put_state(self, inst: Instance, data: bytes, timeout: float = 60.0) -> dict:
        """Import `data` into a buffering instance, which then replays its buffer (`PUT /state`):
        {"imported", "replayed", "buffer_overflow"}. Raises StateError."""
        return self._state_call_json(inst, "PUT", "/state", data, timeout)

    def release(self, inst: Instance, timeout: float = 60.0) -> dict:
        """A buffering instance processes its queue in order and goes on normally (`POST /release`):
        {"replayed", "buffer_overflow"}. Raises StateError."""
        return self._state_call_json(inst, "POST", "/release", b"", timeout)

    def drain(self, inst: Instance, quiet_ms: int, timeout_s: float) -> dict | None:
        """The instance's own answer once drained (`POST /drain`: its port's ring empty by the kernel's
        count, nothing in flight, no frame for `quiet_ms`), or `{"drained": false, ...}` at `timeout_s`.
        None when it cannot tell: an `nf` without the endpoint (404), a port that cannot count its ring
        (501), any other refusal (a buffering instance: 409), or no endpoint to ask (process gone); the
        caller then polls its counters."""
        timeout_ms = max(1, min(60_000, round(timeout_s * 1000)))
        url = f"/drain?quiet_ms={quiet_ms}&timeout_ms={timeout_ms}"
        try:
            status, body = http_unix(str(self._files(inst)["stats"]), "POST", url, b"", timeout_s + 1.0)
        except TimeoutError:
            return {"drained": False, "error": f"no answer within {timeout_s + 1.0:g} s"}
        except OSError:
            return None
        try:
            ans = json.loads(body) if status == 200 else None
        except ValueError:
            ans = None
        return ans if isinstance(ans, dict) and "drained" in ans else None

    def bump_epoch(self, nf_id: str) -> int:
        """INCR the NF's owner-cache epoch (`nf:<id>:{epoch}`) in the host's Redis: instances running with
        `owner_cache` drop their cache at their next timer tick. Returns the new epoch."""
        import redis

        r = redis.Redis(host="127.0.0.1", port=self.redis_port, socket_timeout=2, socket_connect_timeout=2)
        try:
            return int(r.incr(f"nf:{nf_id}:{{epoch}}"))
        finally:
            r.close()

    def alive(self, inst: Instance) -> bool:
        """The instance's NF process runs (checked by PID and command line, so a reused PID does not count)."""
        if not inst.pid or not pid_alive(inst.pid):
            return False
        return inst.id.encode() in (process_argv(inst.pid) or [])

    def _exit_code(self, pid: int | None) -> int | None:
        """The exit status of a process this runtime spawned and that ended (None: unknown or running)."""
        p = self.procs.get(pid) if pid else None
        if p is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            return p.wait(timeout=1)
        return None

    def stop_processes(self, inst: Instance) -> None:
        # relay_pids: only instances started by an agent from before the NFs served unix sockets
        for pid in [inst.pid, *inst.relay_pids]:
            if pid:
                kill_and_wait(pid)
                p = self.procs.pop(pid, None)
                if p is not None:
                    with contextlib.suppress(Exception):
                        p.wait(timeout=1)
        inst.pid, inst.relay_pids = None, []

    def _unplug(self, switch: str, port_if: str, netns: str) -> list[str]:
        """Remove a namespace's bridge port and the namespace (an instance's or a slot's); the errors."""
        errors = []
        try:
            self.switches[switch].detach(port_if)
        except (DatapathError, KeyError) as exc:
            errors.append(str(exc))
        try:
            netns_del(netns)
        except DatapathError as exc:
            errors.append(str(exc))
        return errors

    def stop(self, inst: Instance) -> None:
        """Stop the processes, remove the bridge port, the namespace and the instance's files (idempotent)."""
        self.stop_processes(inst)
        errors = self._unplug(inst.switch, inst.port_if, inst.netns)
        f = self._files(inst)
        for key in ("config", "stats"):
            f[key].unlink(missing_ok=True)
        if errors:
            raise DatapathError(f"stopping {inst.id}: " + "; ".join(errors))

    # -- monitoring inputs ---------------------------------------------------------------------------------
    def port_counters(self) -> dict[str, dict[str, dict[str, int]]]:
        out = {}
        for sid, sw in self.switches.items():
            try:
                out[sid] = sw.driver.port_stats()
            except DatapathError:
                out[sid] = {}
        return out

    def pcie_ports(self) -> dict[str, str]:
        return {sid: nm.if_pcie(self.name, int(sid[4:]))[0] for sid in self.switches if sid != HOST}
