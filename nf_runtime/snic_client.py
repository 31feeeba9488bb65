"""The host's side of an sNIC: the NF instances on that sNIC as the agent's runtime sees them (`RemoteNfs`:
the same calls as `nf_local.LocalNfs`, answered by the sNIC agent), and the watch on its heartbeat."""

from __future__ import annotations

import enum
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from domain.errors import ConfigRejected, RestartNeeded, StartError, StateError
from domain.model import Instance, Nf
from host_datapath.snic_agent_client import SnicAgentClient, SnicAgentError
from host_datapath.sysutil import DatapathError
from nf_local.command import run_config
from nf_local.tier_access import TierAccess
from nf_runtime.nf_shipping import BinaryShipper

log = logging.getLogger("uno.snic_watch")

# An sNIC agent that answered 404 to GET /v1/port-counters is asked again this long after (or at once when
# the heartbeat shows another agent process): an upgrade in place is noticed without a 404 per sample.
COUNTERS_RECHECK_S = 300.0


class RemoteNfs:
    """The NF instances at one sNIC, through its agent. The sNIC agent picks the OpenFlow port and the names
    on the sNIC; `new_instance` leaves them empty until `start` fills them in."""

    def __init__(self, client: SnicAgentClient, store: str, cpu_latency_us: int | None = None):
        """`store`: what the sNIC's NFs get as `--store`: `redis://ADDR:PORT` of the state tier as the sNIC
        reaches it, or "local"."""
        self.client = client
        self.snic = client.snic
        self.store = store
        self.cpu_latency_us = cpu_latency_us
        self.last_start: dict = {}
        self.down = False  # the sNIC is dead (SnicWatch): answer at once, never wait out a timeout
        self.answers = True  # its agent's heartbeat flows (SnicWatch; True when nothing watches it)
        self._cache: tuple[float, dict[str, dict]] = (0.0, {})
        self._lock = threading.Lock()
        self.agent_boot: str | None = None  # its agent process's boot_id, as the heartbeat last told it
        # (agent_boot, monotonic time) of its agent's 404 to GET /v1/port-counters: that agent predates the
        # call, so its port listing is asked at once until the agent changes (or RECHECK_S, unwatched)
        self._no_counters_call: tuple[str | None, float] | None = None
        self.clock: Callable[[], float] = time.monotonic  # that 404's clock (tests give their own)
        self.shipper = BinaryShipper(client)

    def locations(self) -> list[str]:
        return [self.snic]

    def new_instance(self, nf: Nf, location: str, seq: int, used_ofports: set[int]) -> Instance:
        return Instance(id=f"{nf.id}-{seq}", location=location, switch=location, ofport=0, netns="",
                        inside_if="", port_if="")  # fmt: skip

    def free_ofport(self, location: str, used_ofports: set[int]) -> int:
        return 0  # the sNIC agent picks it at start

    def _fill(self, inst: Instance, view: dict) -> None:
        inst.ofport, inst.netns, inst.port_if = int(view["ofport"]), view["netns"], view["port_if"]
        inst.inside_if, inst.pid = view["inside_if"], view.get("pid")
        inst.state = "running" if view.get("alive") else "starting"

    def start(self, nf: Nf, inst: Instance, buffer: int = 0, store: TierAccess | None = None) -> None:
        """`store`: the instance's tier access (default: this sNIC's `--store`, no tenant fields)."""
        t0 = time.monotonic()
        a = store or TierAccess(self.store)
        tier = {"tenant": a.tenant, "store_user": a.user, "store_password": a.password, "store_wait": a.wait}
        body = {"id": inst.id, "nf_id": nf.id, "type": nf.type, "store": a.url, "buffer": buffer,
                "config": run_config(nf.type, nf.config, inst.location, self.cpu_latency_us),
                **{k: v for k, v in tier.items() if v is not None}}  # fmt: skip
        if inst.binary:  # a live update's instance: the sNIC runs the same binary, shipped to it
            body["version"] = self.shipper.ship(Path(inst.binary))
        try:
            view = self.client.start(body)
        except SnicAgentError as exc:
            if exc.status == 400 and exc.field == "config":
                raise ConfigRejected(exc.error.removeprefix("the NF refused its config: ")) from None
            raise StartError(f"{inst.id} on {self.snic}: {exc}") from None
        self._fill(inst, view)
        self.last_start = {"slot": None, "total_ms": round((time.monotonic() - t0) * 1000, 2)}

    def start_processes(self, nf: Nf, inst: Instance, buffer: int = 0) -> None:
        try:
            self._fill(inst, self.client.start_processes(inst.id))
        except SnicAgentError as exc:
            raise StartError(f"{inst.id} on {self.snic}: {exc}") from None

    def _check_up(self, inst: Instance) -> None:
        if self.down:
            raise DatapathError(f"{inst.id}: {self.snic} is down")

    def stop_processes(self, inst: Instance) -> None:
        self._check_up(inst)
        try:
            self.client.stop_processes(inst.id)
        except SnicAgentError as exc:
            if exc.status != 404:
                raise DatapathError(f"stopping {inst.id} on {self.snic}: {exc}") from None
        inst.pid = None

    def stop(self, inst: Instance) -> None:
        self._check_up(inst)
        try:
            self.client.stop(inst.id)
        except SnicAgentError as exc:
            if exc.status != 404:
                raise DatapathError(f"stopping {inst.id} on {self.snic}: {exc}") from None

    def _lost(self, exc: SnicAgentError) -> None:
        """No answer at all (status 0): the agent is not answering until its heartbeat flows again (the
        watch sets `answers` back), so no caller takes the silence for its NFs' deaths meanwhile."""
        if exc.status == 0:
            self.answers = False

    def _view(self, inst: Instance, max_age_s: float = 0.0) -> dict | None:
        """The agent's view of the instance (None: it does not know it, or cannot be reached); with
        `max_age_s` > 0 from one listing of every instance at most that old (monitoring rounds)."""
        if self.down:
            return None
        if max_age_s > 0:
            with self._lock:
                at, views = self._cache
                if time.monotonic() - at > max_age_s:
                    try:
                        views = {v["id"]: v for v in self.client.instances()}
                    except SnicAgentError as exc:
                        self._lost(exc)
                        views = {}
                    self._cache = (time.monotonic(), views)
            return views.get(inst.id)
        try:
            return self.client.instance(inst.id)
        except SnicAgentError as exc:
            self._lost(exc)
            return None

    def alive(self, inst: Instance) -> bool:
        v = self._view(inst)
        return bool(v and v.get("alive"))

    def plugged(self, inst: Instance) -> bool:
        return self._view(inst) is not None

    def healthy(self, inst: Instance, timeout: float = 1.0) -> bool:
        if self.down:
            return False
        try:
            ans = self.client.nf(inst.id, "GET", "health", f"timeout_ms={max(1, round(timeout * 1000))}")
        except SnicAgentError as exc:
            self._lost(exc)
            return False
        return bool(isinstance(ans, dict) and ans.get("healthy"))

    def stats(self, inst: Instance) -> dict | None:
        if self.down:
            return None
        try:
            ans = self.client.nf(inst.id, "GET", "stats")
        except SnicAgentError:
            return None
        return ans if isinstance(ans, dict) else None

    def cpu_seconds(self, inst: Instance) -> float:
        v = self._view(inst, max_age_s=0.2)
        return float(v.get("cpu_s", 0.0)) if v else 0.0

    def get_state(self, inst: Instance, timeout: float = 60.0) -> bytes:
        try:
            return self.client.nf_bytes(inst.id, "state", f"timeout_ms={round(timeout * 1000)}")
        except SnicAgentError as exc:
            raise StateError(f"{inst.id}: GET /state: {exc}") from None

    def _state_json(self, inst: Instance, method: str, call: str, data: bytes, timeout: float) -> dict:
        try:
            ans = self.client.nf(inst.id, method, call, f"timeout_ms={round(timeout * 1000)}", raw=data)
        except SnicAgentError as exc:
            raise StateError(f"{inst.id}: {method} /{call}: {exc}") from None
        if not isinstance(ans, dict):
            raise StateError(f"{inst.id}: {method} /{call}: answer is not JSON")
        return ans

    def put_state(self, inst: Instance, data: bytes, timeout: float = 60.0) -> dict:
        return self._state_json(inst, "PUT", "state", data, timeout)

    def release(self, inst: Instance, timeout: float = 60.0) -> dict:
        return self._state_json(inst, "POST", "release", b"", timeout)

    def hold(self, inst: Instance, buffer: int, timeout: float = 10.0) -> dict:
        try:
            q = f"buffer={buffer}&timeout_ms={round(timeout * 1000)}"
            ans = self.client.nf(inst.id, "POST", "hold", q, raw=b"")
        except SnicAgentError as exc:
            raise StateError(f"{inst.id}: POST /hold: {exc}") from None
        if not isinstance(ans, dict):
            raise StateError(f"{inst.id}: POST /hold: answer is not JSON")
        return ans

    def drain(self, inst: Instance, quiet_ms: int, timeout_s: float, flush: bool = False) -> dict | None:
        timeout_ms = max(1, min(60_000, round(timeout_s * 1000)))
        query = f"quiet_ms={quiet_ms}&timeout_ms={timeout_ms}" + ("&flush=1" if flush else "")
        try:
            ans = self.client.nf(inst.id, "POST", "drain", query)
        except SnicAgentError:
            return None
        ans = ans.get("answer") if isinstance(ans, dict) else None
        return ans if isinstance(ans, dict) and "drained" in ans else None

    def reconfigure(self, nf: Nf, inst: Instance) -> None:
        """Apply `nf.config` to the running instance in place through the sNIC agent (`PUT
        /v1/instances/ID/config`; the agent keeps it for the instance's restarts). ConfigRejected: the NF
        refused it (nothing changed); RestartNeeded: it takes a restart (the NF says so, or an sNIC agent
        without the call: 404); StateError: no answer, or the NF did not answer its agent."""
        if self.down:
            raise StateError(f"{inst.id}: {self.snic} is down")
        body = run_config(nf.type, nf.config, inst.location, self.cpu_latency_us)
        try:
            self.client.put_config(inst.id, body)
        except SnicAgentError as exc:
            if exc.status == 400 and exc.field == "config":
                raise ConfigRejected(exc.error.removeprefix("the NF refused its config: ")) from None
            if exc.status in (404, 409):
                raise RestartNeeded(f"{inst.id} on {self.snic}: {exc.error}") from None
            self._lost(exc)
            raise StateError(f"{inst.id}: PUT config on {self.snic}: {exc}") from None

    def port_counters(self) -> tuple[dict[str, dict[str, int]], float | None]:
        """Its bridge's port counters by name and when its agent read them, on the sNIC's own clock (None
        from an agent without `GET /v1/port-counters`: the caller times the round trip instead)."""
        if self.down:
            return {}, None
        old = self._no_counters_call
        if old is None or old[0] != self.agent_boot or self.clock() - old[1] > COUNTERS_RECHECK_S:
            try:
                got = self.client.port_counters()
                self._no_counters_call = None
                return dict(got["counters"]), float(got["t"])
            except SnicAgentError as exc:
                if exc.status != 404:
                    return {}, None
                self._no_counters_call = (self.agent_boot, self.clock())
            except (KeyError, TypeError, ValueError):
                return {}, None
        try:
            return {p["name"]: p["counters"] for p in self.client.ports()}, None
        except SnicAgentError:
            return {}, None

    def close(self) -> None:
        self.answers = False  # no longer asked (and whoever waits on it stops)
        self.client.close()


def parse_agent_url(url: str) -> str:
    """`http://ADDR:PORT` of an sNIC agent, checked; ValueError says what is wrong."""
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname or not u.port:
        raise ValueError(f"an sNIC agent is reached at http://ADDR:PORT, not {url!r}")
    return f"http://{u.hostname}:{u.port}"


OFPT_HELLO = 0


class Probe(enum.Enum):
    """What an OpenFlow HELLO probe of a switch found."""

    UP = "up"  # it said HELLO
    GONE = "gone"  # refused, reset, closed, unreachable, or not an OpenFlow switch: a definite answer
    SILENT = "silent"  # no answer in time: dead, or only slow (a loaded machine); not a verdict by itself


def probe_switch(target: str, timeout_s: float) -> tuple[Probe, str]:
    """Probe the OpenFlow switch at `tcp:ADDR:PORT`: a switch sends its HELLO as soon as a connection opens.
    An accepted TCP connection alone proves nothing: the kernel completes it from the listen backlog while a
    killed switch's threads are still tearing down (they then close it: GONE). Returns what it found and why."""
    _, addr, port = target.split(":", 2) if target.count(":") >= 2 else ("", "", "0")
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((addr.strip("[]"), int(port)), timeout=timeout_s) as s:
            got = b""
            while len(got) < 8:
                left = deadline - time.monotonic()
                if left <= 0:
                    return Probe.SILENT, "connected, no HELLO in time"
                s.settimeout(left)
                chunk = s.recv(8 - len(got))
                if not chunk:
                    return Probe.GONE, "closed without a HELLO"
                got += chunk
            if got[1] != OFPT_HELLO:
                return Probe.GONE, f"not an OpenFlow HELLO (type {got[1]})"
            return Probe.UP, "HELLO"
    except TimeoutError:
        return Probe.SILENT, "no connection in time"
    except (OSError, ValueError) as exc:
        return Probe.GONE, f"{type(exc).__name__}: {exc}"


def switch_answers(target: str, timeout_s: float) -> bool:
    """The OpenFlow switch at `tcp:ADDR:PORT` says HELLO within `timeout_s`."""
    return probe_switch(target, timeout_s)[0] is Probe.UP


def death_verdict(
    probe: Probe, silent_since: float | None, now: float, confirm_s: float
) -> tuple[bool, float | None]:
    """After the heartbeat stream stopped: is the sNIC dead? Returns (dead, silent_since).

    A switch that is gone (refused, closed) is a verdict at once: a killed machine's sockets say so. A switch that
    is only silent may be slow: a loaded host or sNIC misses a 20 ms HELLO now and then, and a false death
    moves every NF off a healthy sNIC. Silence is a verdict only once it has lasted `confirm_s` (a powered-off
    machine, whose sockets never answer). `silent_since` is when the silence began (None: not silent)."""
    if probe is Probe.UP:
        return False, None
    if probe is Probe.GONE:
        return True, None
    since = now if silent_since is None else silent_since
    return now - since >= confirm_s, since


class SnicWatch:
    """Watches one sNIC through its agent's heartbeat stream (its own thread).

    - an NF that exited there: `on_exit(snic, instance)` at once (the agent puts exits on the stream);
    - the stream stops (no beat for `timeout_ms`, or the connection ends) while the sNIC's switch no longer
      takes OpenFlow connections either (refused or closed; or silent for `confirm_ms`, see `death_verdict`):
      the whole sNIC is dead, `on_dead(snic)` once;
    - the stream stops but the switch still answers: only the agent died (its NFs keep forwarding): nothing
      to do but wait for the agent to come back;
    - the stream comes back after a death: `on_back(snic, boot_id)`.
    """

    def __init__(self, remote: RemoteNfs, openflow: str, on_dead, on_back, on_exit,
                 interval_ms: int = 10, timeout_ms: int = 40, probe_ms: int = 20, confirm_ms: int = 300):  # fmt: skip
        self.remote, self.openflow = remote, openflow
        self.on_dead, self.on_back, self.on_exit = on_dead, on_back, on_exit
        self.interval_ms, self.timeout_s, self.probe_s = interval_ms, timeout_ms / 1000, probe_ms / 1000
        self.confirm_s = confirm_ms / 1000
        self.silent_since: float | None = None  # monotonic time the switch's probes began to go unanswered
        self.verdict = ""  # why it was last declared dead
        self.dead = False
        self.agent_up = False
        self.last_beat = 0.0
        self.boot_id: str | None = None
        self.died_at: float | None = None  # monotonic time the death was seen
        self.lost_at: float | None = None  # monotonic time the heartbeat was last lost
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"uno-snic-watch-{remote.snic}", daemon=True)

    def start(self) -> SnicWatch:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for beat in self.remote.client.heartbeat(self.interval_ms, self.timeout_s):
                    self.last_beat = time.monotonic()
                    self.remote.answers, self.silent_since = True, None
                    if not self.agent_up or self.dead:
                        self._back(beat.get("boot_id", ""))
                    for inst_id in beat.get("exited", []):
                        self.on_exit(self.remote.snic, inst_id)
                    if self._stop.is_set():
                        return
            except (TimeoutError, SnicAgentError, ValueError):
                pass
            now = time.monotonic()
            if self.agent_up or self.lost_at is None:
                self.lost_at = now
            self.agent_up = False
            self.remote.answers = False
            if not self.dead:
                probe, why = probe_switch(self.openflow, self.probe_s)
                since = self.silent_since
                dead, self.silent_since = death_verdict(probe, since, time.monotonic(), self.confirm_s)
                if dead:
                    silent = (
                        f", silent for {(time.monotonic() - since) * 1000:.0f} ms"
                        if since is not None
                        else ""
                    )
                    self.verdict = f"heartbeat lost; switch {self.openflow}: {why}{silent}"
                    log.warning("sNIC %s is dead: %s", self.remote.snic, self.verdict)
                    self.dead, self.died_at, self.silent_since = True, now, None
                    self.on_dead(self.remote.snic)
            # Asked again at once while the loss is fresh: a dying sNIC's processes go one by one (its agent's
            # connection may end before its switch stops answering); then calmer.
            if self.dead:
                self._stop.wait(0.2)
            elif now - self.lost_at < 1.0:
                self._stop.wait(self.interval_ms / 1000)
            else:
                self._stop.wait(0.1)

    def _back(self, boot_id: str) -> None:
        was_dead = self.dead
        self.agent_up, self.dead = True, False
        self.boot_id = self.remote.agent_boot = boot_id
        if was_dead:
            self.on_back(self.remote.snic, boot_id)
