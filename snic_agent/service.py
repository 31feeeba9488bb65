"""The sNIC agent's work: NF instances on this sNIC's bridge, in its CPU cgroup, remembered across its own
restarts; the machine's totals and its ports' counters; a heartbeat that also carries NF exits.

Everything here runs on the sNIC. The host reaches it only through the REST API (api.py)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import select
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from domain.errors import Conflict, NotFound, ValidationError
from domain.model import NF_TYPES, Instance, Nf
from host_datapath.host_switch import BridgePorts
from host_datapath.switch import SwitchDriver
from host_datapath.sysutil import DatapathError, cpu_seconds, read_pidfile, write_private
from nf_local.processes import LocalNfs
from nf_local.tier_access import WAIT_RE, TierAccess
from snic_agent.config import SnicAgentConfig
from snic_agent.versions import NfVersionStore
from snic_datapath.cgroup import CpuCgroup, default_period_us

ID_RE = re.compile(r"^[a-z][a-z0-9-]{0,47}$")
STORE_RE = re.compile(r"redis://[A-Za-z0-9.\-\[\]:]+:([0-9]{1,5})(/[0-9]{1,2})?")
NODE_RE = re.compile(r"[A-Za-z0-9.\-]+:([0-9]{1,5})|\[[0-9a-fA-F:]+\]:([0-9]{1,5})")
TIER_KEYS = ("tenant", "store_user", "store_password", "store_wait")  # a tier with access control
START_KEYS = {"id", "nf_id", "type", "config", "store", "buffer", "version", *TIER_KEYS}
TENANT_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
USER_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MAX_BUFFER = 1_000_000
HOST_REPRESENTOR_RE = re.compile(r"^pf[0-9]+hpf$")  # BlueField: the host's PF representor
UPLINK_RE = re.compile(r"^p[0-9]+$")  # BlueField: the physical uplinks


def _tier_url(url: str) -> bool:
    """`redis://HOST:PORT[/DB]` or `redis-cluster://HOST:PORT,...` with ports in 1..65535."""
    if url.startswith("redis-cluster://"):
        nodes = url[len("redis-cluster://") :].split(",")
        ms = [NODE_RE.fullmatch(n) for n in nodes]
        return all(m and 1 <= int(m.group(1) or m.group(2)) <= 65535 for m in ms)
    m = STORE_RE.fullmatch(url)
    return bool(m) and 1 <= int(m.group(1)) <= 65535


def _tier_fields(body: dict) -> dict:
    """The optional access fields of a start: tenant, ACL user and password, replica acknowledgement."""
    checks = {
        "tenant": (TENANT_RE, "must be 1-32 characters [a-z0-9-], starting with a letter"),
        "store_user": (USER_RE, "must be 1-64 characters [A-Za-z0-9._-]"),
        "store_password": (re.compile(r"^[!-~]{1,256}$"), "must be 1-256 printable characters"),
        "store_wait": (WAIT_RE, 'must be replicas 1-16 or "N:MS"'),
    }
    out = {}
    for k, (pat, msg) in checks.items():
        if body.get(k) is not None:
            if not isinstance(body[k], str) or not pat.fullmatch(body[k]):
                raise ValidationError(k, msg)
            out[k] = body[k]
    if ("store_user" in out) != ("store_password" in out):
        raise ValidationError(
            "store_password" if "store_user" in out else "store_user", "give both or neither"
        )
    return out


def tier_access(rec: dict) -> TierAccess:
    """The NF's access to the tier as its start asked for it."""
    return TierAccess(
        rec["store"],
        rec.get("tenant"),
        rec.get("store_user"),
        rec.get("store_password"),
        rec.get("store_wait"),
    )


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


class ExitWatch:
    """Reports the exit of watched processes at once (pidfds, Linux >= 5.3): `on_exit(key)` from its thread."""

    def __init__(self, on_exit):
        self.on_exit = on_exit
        self._fds: dict[int, tuple[str, int]] = {}  # pidfd -> (key, pid)
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._stop = False
        self.thread = threading.Thread(target=self._run, name="uno-snic-exits", daemon=True)

    def watch(self, key: str, pid: int) -> None:
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # gone already
            self.on_exit(key)
            return
        with self._lock:
            self._fds[fd] = (key, pid)
        os.write(self._wake_w, b"w")

    def forget(self, key: str) -> None:
        with self._lock:
            for fd in [fd for fd, (k, _) in self._fds.items() if k == key]:
                os.close(fd)
                del self._fds[fd]
        os.write(self._wake_w, b"w")

    def _run(self) -> None:
        while not self._stop:
            poller = select.poll()
            poller.register(self._wake_r, select.POLLIN)
            with self._lock:
                for fd in self._fds:
                    poller.register(fd, select.POLLIN)
            for fd, _ in poller.poll():
                if fd == self._wake_r:
                    os.read(self._wake_r, 4096)
                    continue
                with self._lock:
                    entry = self._fds.pop(fd, None)
                    if entry is not None:
                        os.close(fd)
                if entry is not None:
                    self.on_exit(entry[0])

    def start(self) -> ExitWatch:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop = True
        os.write(self._wake_w, b"w")
        self.thread.join(timeout=2)


class SnicAgent:
    def __init__(self, cfg: SnicAgentConfig):
        self.cfg = cfg
        self.boot_id = uuid.uuid4().hex  # this agent process: a new one after any restart
        self.machine_boot = _boot_id()
        self.started = time.time()
        self.lock = threading.RLock()
        self.state_file = cfg.directory / "instances.json"
        drv = SwitchDriver(cfg.bridge, cfg.ovsdb, netns=cfg.switch_netns)
        drv.openflow = f"unix:{drv.rundir_of_bridge()}/{cfg.bridge}.mgmt"  # the bridge's own local socket
        self.bridge = BridgePorts(drv, cfg.switch_netns)
        self.cgroup = CpuCgroup(cfg.cgroup) if cfg.cgroup else None
        cgroups = {cfg.snic: self.cgroup} if self.cgroup else {}
        self.nfs = LocalNfs(
            cfg.prefix, {cfg.snic: self.bridge}, cfg.directory, "local", cfg.nf_binary, cfg.warm_slots,
            cgroups=cgroups, shared_netns=cfg.switch_netns,
        )  # fmt: skip
        self.versions = NfVersionStore(cfg.directory / "nf-versions")  # shipped by the host (live update)
        self.records: dict[str, dict] = {}  # instance id -> its start request + Instance + state
        self.seq = 0
        self.events: list[dict] = []  # NF exits, for heartbeat streams (each stream keeps its own cursor)
        self.changed = threading.Condition(self.lock)
        self.exits = ExitWatch(self._exited)

    # -- life of the agent ----------------------------------------------------------------------------------
    def open(self) -> list[str]:
        """Create the NFs' cgroup (kept if it exists: adopted NFs are in it), adopt the instances a previous
        agent process left (running ones keep running; dead ones are reported so), start watching them.
        Returns what it did, one line each."""
        self.cfg.directory.mkdir(parents=True, exist_ok=True)
        done = []
        if self.cgroup is not None and not self.cgroup.exists():
            quota = self.cfg.cpu_quota or float(os.cpu_count() or 1)
            self.cgroup.create(quota, self.cfg.cpu_period_us or default_period_us(quota))
            done.append(f"cgroup {self.cfg.cgroup}: {quota:g} cores")
        self._load()
        self.exits.start()
        for rec in self.records.values():
            inst = self._inst(rec)
            if inst.pid and self.nfs.alive(inst):  # its pid AND its command line (a pid may be reused)
                rec["state"] = "running"
                self.exits.watch(inst.id, inst.pid)
                done.append(f"adopted {inst.id} (pid {inst.pid})")
            else:
                rec["state"] = "dead"
                done.append(f"{inst.id} is not running")
        self._save()
        self.nfs.open()
        return done

    def close(self) -> None:
        """Stop the agent's threads and free slots; NFs keep running (a restarted agent adopts them)."""
        self.exits.stop()
        self.nfs.close()

    def _load(self) -> None:
        try:
            data = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError):
            bad = self.state_file.with_suffix(".bad")
            with contextlib.suppress(OSError):
                self.state_file.replace(bad)
            return
        self.seq = int(data.get("seq", 0))
        self.records = dict(data.get("instances", {}))

    def _save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        write_private(tmp, json.dumps({"seq": self.seq, "instances": self.records}))  # tier passwords
        os.replace(tmp, self.state_file)

    @staticmethod
    def _inst(rec: dict) -> Instance:
        return Instance(**rec["instance"])

    def _exited(self, inst_id: str) -> None:
        with self.changed:
            rec = self.records.get(inst_id)
            if rec is None or rec.get("state") == "stopping":
                return
            rec["state"] = "dead"
            self.events.append({"t": time.time(), "exited": inst_id})
            self.changed.notify_all()

    # -- instances ------------------------------------------------------------------------------------------
    def parse_start(self, body: Any) -> dict:
        if not isinstance(body, dict):
            raise ValidationError("body", "expected a JSON object")
        for k in body:
            if k not in START_KEYS:
                raise ValidationError(k or "body", f"unknown field (known: {', '.join(sorted(START_KEYS))})")
        for k in ("id", "nf_id", "type", "store"):
            if k not in body:
                raise ValidationError(k, "required")
        for k in ("id", "nf_id"):
            if not isinstance(body[k], str) or not ID_RE.fullmatch(body[k]):
                raise ValidationError(k, "must be 1-48 characters [a-z0-9-], starting with a letter")
        if body["type"] not in NF_TYPES:
            raise ValidationError("type", f"must be one of {', '.join(NF_TYPES)}")
        config = body.get("config", {})
        if not isinstance(config, dict):
            raise ValidationError("config", "expected a JSON object (the NF's config)")
        store = body["store"]
        if not isinstance(store, str) or not (store == "local" or _tier_url(store)):
            raise ValidationError(
                "store",
                "must be redis://HOST:PORT[/DB] or redis-cluster://HOST:PORT,... (the state tier over TCP) "
                "or local",
            )
        tier = _tier_fields(body)
        buffer = body.get("buffer", 0)
        if isinstance(buffer, bool) or not isinstance(buffer, int) or not 0 <= buffer <= MAX_BUFFER:
            raise ValidationError("buffer", f"must be an integer in [0, {MAX_BUFFER}]")
        version = {}
        if "version" in body:  # a shipped nf version (live update); absent: the agent's own binary
            self.versions.binary(body["version"])
            version = {"version": body["version"]}
        return {"id": body["id"], "nf_id": body["nf_id"], "type": body["type"], "config": config,
                "store": store, "buffer": buffer, **tier, **version}  # fmt: skip

    @staticmethod
    def _nf(rec: dict) -> Nf:
        return Nf(rec["nf_id"], rec["type"], rec["config"], 0, 0.0, None, None)

    def start(self, req: dict) -> dict:
        """Start an instance (waits for its /health); ConfigRejected / StartError from the runtime."""
        with self.lock:
            if req["id"] in self.records:
                raise Conflict(f"instance {req['id']!r} exists", "id")
            self.seq += 1
            used = {r["instance"]["ofport"] for r in self.records.values()}
            nf = self._nf(req)
            inst = self.nfs.new_instance(nf, self.cfg.snic, self.seq, used)
            inst.id = req["id"]
            if "version" in req:
                inst.binary = str(self.versions.binary(req["version"]))
            rec = {**req, "instance": asdict(inst), "state": "starting"}
            self.records[inst.id] = rec
            self._save()
        try:
            self.nfs.start(nf, inst, req["buffer"], store=tier_access(req))
        except BaseException:
            with self.lock:
                self.records.pop(inst.id, None)
                self._save()
            raise
        with self.lock:
            rec.update(instance=asdict(inst), state="running")
            self._save()
            self.exits.watch(inst.id, inst.pid)
            return self.view(rec)

    def record(self, inst_id: str) -> dict:
        rec = self.records.get(inst_id)
        if rec is None:
            raise NotFound(f"no instance {inst_id!r}")
        return rec

    def stop(self, inst_id: str) -> None:
        """Stop the instance and remove its port and namespace."""
        with self.lock:
            rec = self.record(inst_id)
            rec["state"] = "stopping"
        self.exits.forget(inst_id)
        self.nfs.stop(self._inst(rec))
        with self.lock:
            self.records.pop(inst_id, None)
            self._save()

    def stop_processes(self, inst_id: str) -> dict:
        with self.lock:
            rec = self.record(inst_id)
            rec["state"] = "stopping"
        self.exits.forget(inst_id)
        inst = self._inst(rec)
        self.nfs.stop_processes(inst)
        with self.lock:
            rec.update(instance=asdict(inst), state="stopped")
            self._save()
            return self.view(rec)

    def start_processes(self, inst_id: str) -> dict:
        """(Re)start the instance's NF in its existing namespace, with the config it was started with."""
        with self.lock:
            rec = self.record(inst_id)
        inst = self._inst(rec)
        self.exits.forget(inst_id)
        self.nfs.stop_processes(inst)
        self.nfs.stores[inst.id] = tier_access(rec)
        self.nfs.start_processes(self._nf(rec), inst)
        with self.lock:
            rec.update(instance=asdict(inst), state="running")
            self._save()
            self.exits.watch(inst.id, inst.pid)
            return self.view(rec)

    @staticmethod
    def parse_config(body: Any) -> dict:
        """The body of `PUT /v1/instances/ID/config`: the NF's whole new config, a JSON object."""
        if not isinstance(body, dict):
            raise ValidationError("body", "expected a JSON object (the NF's config)")
        return body

    def reconfigure(self, inst_id: str, config: dict) -> dict:
        """Give the running instance `config` in place (its NF's `PUT /config`); once applied it is also the
        config its restarts read. ConfigRejected (the NF refused it), RestartNeeded (it takes a restart) and
        StateError (no answer) from the runtime; the record keeps the old config then."""
        with self.lock:
            rec = self.record(inst_id)
            inst, nf = self._inst(rec), self._nf({**rec, "config": config})
        self.nfs.reconfigure(nf, inst)
        with self.lock:
            rec["config"] = config
            self._save()
            return self.view(rec)

    def view(self, rec: dict, health: bool = False, ports: dict[str, dict] | None = None) -> dict:
        """What the host sees of an instance; with `ports` (the bridge's port counters by name), its port's
        packet and byte counters too (the switch's view: `tx_*` went into the NF, `rx_*` came out of it)."""
        inst = self._inst(rec)
        alive = bool(inst.pid) and self.nfs.alive(inst)
        out = {
            "id": inst.id, "nf_id": rec["nf_id"], "type": rec["type"], "ofport": inst.ofport,
            "port_if": inst.port_if, "inside_if": inst.inside_if, "netns": inst.netns, "pid": inst.pid,
            "state": rec["state"], "version": rec.get("version"),
            "alive": alive, "cpu_s": round(self.nfs.cpu_seconds(inst), 3) if alive else 0.0,
        }  # fmt: skip
        if health:
            out["healthy"] = alive and self.nfs.healthy(inst, timeout=0.2)
        if ports is not None:
            out["counters"] = ports.get(inst.port_if, {})
        return out

    def port_counters(self) -> dict[str, dict]:
        """The bridge's port counters by port name (one OpenFlow port-stats dump)."""
        try:
            return self.bridge.driver.port_stats()
        except DatapathError as exc:
            raise OSError(f"OVS: {exc}") from None

    def port_counters_at(self) -> dict:
        """`{"t", "counters"}`: the bridge's port counters by name and when they were read, the middle of the
        dump on this machine's monotonic clock (seconds). The host rates each sNIC's counters over the
        interval between two such reads: the round trip to this agent varies under load, the read does not."""
        t0 = time.monotonic()
        counters = self.port_counters()
        t1 = time.monotonic()
        return {"t": round((t0 + t1) / 2, 6), "counters": counters}

    def instances(self, health: bool = False, counters: bool = False) -> list[dict]:
        with self.lock:
            recs = list(self.records.values())
        ports = self.port_counters() if counters else None
        return [self.view(r, health, ports) for r in recs]

    def instance(self, inst_id: str) -> Instance:
        with self.lock:
            return self._inst(self.record(inst_id))

    # -- the machine ----------------------------------------------------------------------------------------
    def switch_cpu_s(self) -> float | None:
        """CPU seconds its switch (ovs-vswitchd, pidfile beside its OVSDB socket) has used, None when it cannot
        tell: what switching offload costs this sNIC (bench/offload)."""
        pid = read_pidfile(Path(self.cfg.ovsdb.removeprefix("unix:")).parent / "ovs-vswitchd.pid")
        return round(cpu_seconds([pid]), 3) if pid else None

    # -- nf versions (live update) ---------------------------------------------------------------------------
    def nf_versions(self) -> list[dict]:
        """The shipped versions, each with the instances running it."""
        with self.lock:
            used = self._version_users()
        return [{**v, "instances": used.get(v["version"], [])} for v in self.versions.list()]

    def put_nf_version(self, name: str, data: bytes, sha256: str) -> tuple[dict, bool]:
        return self.versions.put(name, data, sha256)

    def delete_nf_version(self, name: str) -> None:
        with self.lock:  # no start can pick it meanwhile
            self.versions.delete(name, self._version_users().get(name, []))

    def _version_users(self) -> dict[str, list[str]]:
        used: dict[str, list[str]] = {}
        for inst_id, rec in self.records.items():
            if "version" in rec:
                used.setdefault(rec["version"], []).append(inst_id)
        return used

    def info(self) -> dict:
        mem = {}
        with contextlib.suppress(OSError):
            for line in Path("/proc/meminfo").read_text().splitlines():
                k, _, v = line.partition(":")
                if k in ("MemTotal", "MemAvailable"):
                    mem[k] = int(v.split()[0])
        out = {
            "snic": self.cfg.snic, "boot_id": self.boot_id, "machine_boot_id": self.machine_boot,
            "uptime_s": round(time.time() - self.started, 3), "cpus": os.cpu_count(),
            "mem_total_kb": mem.get("MemTotal"), "mem_available_kb": mem.get("MemAvailable"),
            "loadavg": list(os.getloadavg()), "instances": len(self.records), "arch": platform.machine(),
            "nf_cpu_s": round(sum(i["cpu_s"] for i in self.instances()), 3),
            "switch_cpu_s": self.switch_cpu_s(),
        }  # fmt: skip
        if self.cgroup is not None and self.cgroup.exists():
            t = self.cgroup.throttling()
            out["cgroup"] = {
                "name": self.cfg.cgroup, "cpu_quota": self.cgroup.quota_cores(),
                "cpu_period_us": self.cgroup.period_us(), "nr_periods": t.periods,
                "nr_throttled": t.throttled, "throttled_s": t.throttled_s,
            }  # fmt: skip
        return out

    def _kind(self, name: str, ofport: int, nf_ports: set[str]) -> str:
        if name in nf_ports:
            return "nf"
        if name == self.cfg.bridge:
            return "local"
        if self.cfg.pcie_port is not None:
            if name == self.cfg.pcie_port:
                return "pcie"
        elif HOST_REPRESENTOR_RE.fullmatch(name):
            return "pcie"
        if self.cfg.wire_ports is not None:
            if name in self.cfg.wire_ports:
                return "wire"
        elif UPLINK_RE.fullmatch(name):
            return "wire"
        return "slot" if name.startswith(f"{self.cfg.prefix}-x") else "other"

    def ports(self) -> list[dict]:
        """Every port of the bridge: name, ofport, kind (pcie | wire | nf | slot | other) and counters."""
        try:
            ofports = self.bridge.driver.ports()
            stats = self.bridge.driver.port_stats()
        except DatapathError as exc:
            raise OSError(f"OVSDB: {exc}") from None
        with self.lock:
            nf_ports = {r["instance"]["port_if"] for r in self.records.values()}
        return [
            {"name": n, "ofport": p, "kind": self._kind(n, p, nf_ports), "counters": stats.get(n, {})}
            for n, p in sorted(ofports.items(), key=lambda x: x[1])
        ]

    # -- heartbeat -------------------------------------------------------------------------------------------
    def beats(self, interval_s: float, stop: threading.Event | None = None):
        """Lines of JSON, one each `interval_s` and at once on an NF exit: {"seq", "t", "boot_id", "exited"}."""
        with self.lock:
            cursor = len(self.events)
        seq = 0
        while stop is None or not stop.is_set():
            with self.changed:
                if len(self.events) == cursor:
                    self.changed.wait(interval_s)
                new = self.events[cursor:]
                cursor = len(self.events)
            seq += 1
            beat = {"seq": seq, "t": round(time.time(), 4), "boot_id": self.boot_id,
                    "exited": [e["exited"] for e in new]}  # fmt: skip
            yield (json.dumps(beat) + "\n").encode()
