"""NF instances as processes on this machine: the host, or an sNIC under its sNIC agent.

Each instance gets a network namespace `PREFIX-iSEQ` plugged into its local switch as OpenFlow port >= 200,
and runs `nf TYPE --port IFACE ...` there. The NF reaches the state tier at the store URL it is given (a unix
socket on the host, TCP from an sNIC) and serves its stats endpoint on a unix socket in this machine's
directory (`--stats unix://DIR/ID.stats`), so no relay runs next to it: a relay would add wake-ups and copies
to every round trip, inside the sNIC's CPU quota for sNIC NFs. Where a location has a CPU cgroup (an sNIC's
compute budget) the NF process joins it before it executes, so none of its CPU time is charged elsewhere
(command.spawn_command).

Warm slots (`warm_slots` per location, nf_local/slots.py): namespaces `PREFIX-wK` already plugged into
their switch (ofport >= SLOT_PORT_BASE); `start` takes one when its location has one free and then only
starts `nf` and waits for /health. Slot files `slots/K.json` in the directory are written before a slot's
resources are made and removed when it is taken or destroyed, so `open()` removes what a previous owner left
(crash included) and a teardown sweeps the rest by name.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from domain.errors import ConfigRejected, RestartNeeded, StartError, StateError
from domain.model import Instance, Nf
from host_datapath.sysutil import (
    MAX_UNIX_PATH,
    DatapathError,
    cpu_seconds,
    kill_and_wait,
    link_exists,
    netns_del,
    netns_exists,
    netns_list,
    netns_pids,
    pid_alive,
    process_argv,
    run,
)
from nf_local.command import MAX_CPU_LATENCY_US, run_config, spawn_command
from nf_local.endpoints import http_get_unix, http_unix, redis_ping, redis_ping_tcp
from nf_local.slots import Slot, SlotPool
from nf_local.tier_access import TierAccess, as_access
from snic_datapath.cgroup import CpuCgroup

REPO_ROOT = Path(__file__).resolve().parents[1]
NF_BINARY = REPO_ROOT / "nfs" / "target" / "release" / "nf"
HEALTH_TIMEOUT = 30.0
NF_PORT_BASE = 200  # instances' OpenFlow ports on their switch
SLOT_PORT_BASE = 700  # warm slots' OpenFlow ports (instances allocate from NF_PORT_BASE up)


class LocalSwitch(Protocol):
    """A switch of this machine NF namespaces are plugged into (host_datapath.host_switch.HostSwitch)."""

    driver: Any  # host_datapath.switch.SwitchDriver: ports(), port_stats()

    def attach_namespace(self, ns: str, inside: str, port: str, ofport: int, ip_cidr: str | None = None,
                         on_veth: Callable[[], object] | None = None) -> None: ...  # fmt: skip
    def detach(self, port: str) -> None: ...
    def close(self) -> None: ...


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def _error_text(body: bytes) -> str:
    """The `error` of an NF endpoint's JSON error answer, else the body's start."""
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return body[:200].decode(errors="replace")


class LocalNfs:
    """Starts, supervises and stops NF instances on this machine's switches (one per location)."""

    def __init__(
        self,
        prefix: str,
        switches: dict[str, LocalSwitch],
        directory: Path,
        store: str,
        nf_binary: Path = NF_BINARY,
        warm_slots: int = 0,
        cpu_latency_us: int | None = None,
        cgroups: dict[str, CpuCgroup] | None = None,
        shared_netns: str | None = None,
    ):
        """`prefix`: of every namespace and interface made (`PREFIX-iSEQ`, ...; a teardown sweeps by it).
        `switches`: location -> its switch. `directory`: config, stats sockets, logs and slot files.
        `store`: the NFs' `--store` unless a start names another: "local" (in-process state: the baseline
        that shows what a failover loses), "unix:///PATH" or "redis://HOST:PORT". `warm_slots`: free
        pre-created slots kept per location (0 = none). `cpu_latency_us`: see `run_config` (None: NFs leave
        the machine's idle states alone). `cgroups`: location -> the CPU cgroup its NFs run in.
        `shared_netns`: run every NF in this namespace (the machine's own network: an sNIC's NFs reach the
        state tier over TCP from there) on its own veth, instead of in a namespace of its own."""
        if not 0 <= warm_slots <= 8:
            raise ValueError(f"warm_slots must be in [0, 8], not {warm_slots!r}")
        if cpu_latency_us is not None and not 0 <= cpu_latency_us <= MAX_CPU_LATENCY_US:
            raise ValueError(f"cpu_latency_us must be in [0, {MAX_CPU_LATENCY_US}], not {cpu_latency_us!r}")
        self.prefix = prefix
        self.shared_netns = shared_netns
        self.switches = switches
        self.cgroups = cgroups or {}
        self.dir = directory
        self.store = store
        self.nf_binary = nf_binary
        self.cpu_latency_us = cpu_latency_us
        self.procs: dict[int, subprocess.Popen] = {}
        self.stores: dict[
            str, TierAccess
        ] = {}  # instance -> the tier access it started with (restarts keep it)
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.slot_dir = self.dir / "slots"
        self.pool = SlotPool(self.create_slot, self.destroy_slot, self.locations(), warm_slots)
        self._slot_lock = threading.Lock()  # slot names and ports (the refill thread vs cleanup)
        self._slot_seq = 0  # next warm slot key (see create_slot)
        self.last_start: dict = {}  # step times of the last `start` (profiling; bench/migration)

    def open(self) -> None:
        """Check the NF binary, remove the warm slots a previous owner left, start filling the pool."""
        if not self.nf_binary.exists():
            raise StartError(f"NF binary {self.nf_binary} not built (run `scripts/setup.sh rust`)")
        self.clean_stale_slots()
        for sw in self.switches.values():  # connect OVSDB here, not racing the refill thread's first use
            with contextlib.suppress(Exception):
                getattr(sw.driver, "api", None)
        self.pool.start()

    def close(self) -> list[str]:
        """Destroy the free warm slots and drop OVSDB connections; NF processes keep running. Returns the
        slot cleanup errors."""
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
            if not self.dir.exists():  # the machine is being torn down: build nothing it would not sweep
                raise StartError(f"directory {self.dir} is gone (torn down)")
            self.slot_dir.mkdir(parents=True, exist_ok=True)
            # Keys only grow (also past the names instances took over): a released slot's namespace name
            # does not come back at once as a new slot (observers would take it for a leftover).
            pat = re.compile(rf"^{re.escape(self.prefix)}-w(\d+)$")
            used = [int(m.group(1)) for n in self._names_in_use() if (m := pat.match(n))]
            key = max([self._slot_seq, *(k + 1 for k in used)])
            while self._slot_file(key).exists():
                key += 1
            self._slot_seq = key + 1
            sw = self.switches[location]
            taken = set(sw.driver.ports().values())
            ofport = SLOT_PORT_BASE
            while ofport in taken:
                ofport += 1
            p = self.prefix
            slot = Slot(
                key, location, self.shared_netns or f"{p}-w{key}", f"{p}-w{key}", f"{p}-x{key}", ofport
            )
            self._slot_file(key).write_text(json.dumps(slot.to_json()))
        try:
            sw.attach_namespace(slot.netns, slot.inside_if, slot.port_if, slot.ofport)
            if not self._slot_file(key).exists():  # `uno down` ran meanwhile: it sweeps by name, we raise
                raise StartError(f"slot {slot.netns}: directory removed while it was made")
        except BaseException:
            with contextlib.suppress(Exception):
                self.destroy_slot(slot)
            raise
        return slot

    def _names_in_use(self) -> list[str]:
        """Namespaces (own namespaces) or interfaces of the shared namespace: what a new slot's name avoids."""
        if self.shared_netns is None:
            return netns_list()
        out = run(["ip", "-o", "link"], netns=self.shared_netns, check=False)
        return [ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines() if ":" in ln]

    def _slot_made(self, slot: Slot) -> bool:
        if self.shared_netns is None:
            return netns_exists(slot.netns)
        return link_exists(slot.inside_if, self.shared_netns)

    def destroy_slot(self, slot: Slot) -> None:
        """Remove a slot that no instance took: its processes, bridge port, namespace and file (idempotent)."""
        for pid in netns_pids(slot.netns) if self.shared_netns is None else []:
            kill_and_wait(pid)
            p = self.procs.pop(pid, None)
            if p is not None:
                with contextlib.suppress(Exception):
                    p.wait(timeout=1)
        if not self._slot_made(slot):
            # never made, or swept with its veth by `uno down` (whose switches may be gone: no OVSDB call)
            self._slot_file(slot.key).unlink(missing_ok=True)
            return
        errors = self._unplug(slot.location, slot.port_if, slot.netns)
        self._slot_file(slot.key).unlink(missing_ok=True)
        if errors:
            raise DatapathError(f"removing slot {slot.netns}: " + "; ".join(errors))

    def clean_stale_slots(self) -> list[str]:
        """Destroy the free slots a previous owner left (their files); returns the errors."""
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
        while slot is not None and not self._slot_made(slot):
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
        return sorted(self.switches)

    # -- one instance ---------------------------------------------------------------------------------------
    def new_instance(self, nf: Nf, location: str, seq: int, used_ofports: set[int]) -> Instance:
        """Allocate names and an OpenFlow port for a new instance of `nf` at `location` (no side effects)."""
        return Instance(
            id=f"{nf.id}-{seq}",
            location=location,
            switch=location,
            ofport=self.free_ofport(location, used_ofports),
            netns=self.shared_netns or f"{self.prefix}-i{seq}",
            inside_if=f"{self.prefix}-i{seq}",
            port_if=f"{self.prefix}-j{seq}",
        )

    def free_ofport(self, location: str, used_ofports: set[int]) -> int:
        """The lowest OpenFlow port from NF_PORT_BASE up that neither an instance (`used_ofports`) nor any port
        on the switch has (warm slots take theirs from SLOT_PORT_BASE up, so the two ranges do not race)."""
        taken = set(used_ofports) | set(self.switches[location].driver.ports().values())
        ofport = NF_PORT_BASE
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
            "password": self.dir / f"{inst.id}.tier-pass",
        }

    def start(self, nf: Nf, inst: Instance, buffer: int = 0, store: str | TierAccess | None = None) -> None:
        """Plug the instance's namespace into its switch and start its processes; wait for /health.
        `buffer` > 0: the NF starts in buffering mode (`nf --buffer`), queueing up to that many packets
        until its state arrives (`put_state`, local store) or it is released (`release`, state in the tier).
        `store`: its `--store` or its whole tier access (default: this machine's), kept for its restarts.

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
        self.stores[inst.id] = as_access(store or self.store)
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
        cg = self.cgroups.get(location)
        return [str(d / "cgroup.procs") for d in cg.dirs()] if cg else []

    def spawn(self, cmd: list[str], log: Path, netns: str | None = None, cgroup: list[str] = ()) -> int:
        """Start `cmd` (its own session, output to `log`) in namespace `netns`, in the cgroups whose
        `cgroup.procs` files `cgroup` lists, which it joins before it executes.

        No code runs in a fork of the agent (CPython then starts the child with vfork: a fork of the agent
        costs ms of page-table copying), and the call returns at once: `sh` joins the cgroups (a cgroup
        write waits for an RCU grace period: not on the agent's thread), then `nsenter --net` enters the
        namespace and executes `cmd` (same PID throughout). `ip netns exec` would also remount /sys, which
        the NF does not read. A failed cgroup write ends `sh` (exit 126, message in
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
        """Write the instance's config file and spawn `nf` in its namespace (its stats endpoint on a unix
        socket); returns the monotonic time the spawn returned (see `await_nf`)."""
        f = self._files(inst)
        if len(str(f["stats"])) > MAX_UNIX_PATH:
            raise StartError(
                f"{inst.id}: stats socket path {f['stats']} is longer than {MAX_UNIX_PATH} bytes"
            )
        self.config_files(nf, inst)
        cg = self._cgroup_files(inst.location)
        t0 = time.monotonic()
        store = self.stores.get(inst.id) or as_access(self.store)
        binary = inst.binary or str(self.nf_binary)  # a live update's instance runs its own version
        try:
            inst.pid = self.spawn(
                [binary, nf.type, "--port", inst.inside_if,
                 *store.args(f["password"]), "--nf-id", nf.id, "--instance", inst.id,
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
        """Whether the state tier answers a PING where this machine's NFs reach it (None: local state)."""
        if self.store == "local":
            return None
        if self.store.startswith("unix://"):
            return redis_ping(self.store[len("unix://") :], timeout)
        return redis_ping_tcp(self.store, timeout)

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

    def hold(self, inst: Instance, buffer: int, timeout: float = 10.0) -> dict:
        """A running instance queues what it receives from now on, at most `buffer` frames, until `release`
        (`POST /hold?buffer=N`; a scale-in's staying instances): {"holding", "pending"}. Raises StateError."""
        return self._state_call_json(inst, "POST", f"/hold?buffer={buffer}", b"", timeout)

    def drain(self, inst: Instance, quiet_ms: int, timeout_s: float, flush: bool = False) -> dict | None:
        """The instance's own answer once drained (`POST /drain`: its port's ring empty by the kernel's
        count, nothing in flight, no frame for `quiet_ms`), or `{"drained": false, ...}` at `timeout_s`.
        `flush`: once every frame that reached its port before `quiet_ms` passed has left, while it keeps
        receiving (`POST /drain?flush=1`; a scale-out's old instances).
        None when it cannot tell: an `nf` without the endpoint (404), a port that cannot count its ring
        (501), any other refusal (a buffering instance: 409), or no endpoint to ask (process gone); the
        caller then polls its counters."""
        timeout_ms = max(1, min(60_000, round(timeout_s * 1000)))
        url = f"/drain?quiet_ms={quiet_ms}&timeout_ms={timeout_ms}" + ("&flush=1" if flush else "")
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

    def reconfigure(self, nf: Nf, inst: Instance, timeout: float = 30.0) -> None:
        """Apply `nf.config` to the running instance in place (`PUT /config`), then make it the config its
        restarts read. ConfigRejected: the NF refused it (nothing changed); RestartNeeded: it takes a restart
        (a runtime option changes, or the NF type cannot change in place); StateError: no answer."""
        body = json.dumps(run_config(nf.type, nf.config, inst.location, self.cpu_latency_us)).encode()
        what = f"{inst.id}: PUT /config"
        try:
            status, answer = http_unix(str(self._files(inst)["stats"]), "PUT", "/config", body, timeout)
        except OSError as exc:
            raise StateError(f"{what}: {exc}") from None
        msg = _error_text(answer)
        if status == 400:
            raise ConfigRejected(msg)
        if status in (404, 409):  # 404: an nf without the endpoint
            raise RestartNeeded(f"{what}: {msg}")
        if status != 200:
            raise StateError(f"{what}: {status} {msg}")
        self.config_files(nf, inst)

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
        """Stop the instance's process, if it still is the instance's (its pid may be another's by now: after
        a reboot, a pid recorded before it names whatever runs under it)."""
        own = inst.pid if inst.pid and self.alive(inst) else None
        # relay_pids: only instances started before the NFs served unix sockets
        for pid in [own, *inst.relay_pids]:
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
        if netns != self.shared_netns:
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
        for key in ("config", "stats", "password"):
            f[key].unlink(missing_ok=True)
        self.stores.pop(inst.id, None)
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

    def cpu_seconds(self, inst: Instance) -> float:
        """CPU time (s) the instance's NF process used so far (0 once it is gone)."""
        return cpu_seconds([inst.pid] if inst.pid else [])
