"""A small typed client of OneSwitch's REST API (oneswitch/README.md): health, switches, port map, remap, rules.

Used by `uno up` (health), the agent (map NF ports), migration (remap) and the tests. Every non-2xx answer is
raised as `OneSwitchError` carrying the HTTP status and OneSwitch's JSON error (`error`, `field`).

Transport: kept-alive HTTP/1.1 connections (a small pool, thread-safe), TCP_NODELAY: no TCP set-up on the
failover's remap call (bench/RESULTS.md `migration` compares both). An idle pooled connection the server has
closed (its idle timeout, a OneSwitch restart) is seen before use and replaced; one that breaks while the
request is sent is replaced and the request sent once more. An error on a fresh connection is status 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.errors import TableRefused, TablesUnsupported
from host_datapath.rest_client import RestClient, RestError


class OneSwitchError(RestError):
    """An error answer of OneSwitch (status >= 400), or no answer at all (status 0)."""

    what = "OneSwitch"


@dataclass(frozen=True)
class PortMapping:
    """Virtual port `vport` is physical port `port` of switch `switch` ("host", "snic0", ...).

    `instances`: every (switch, port) serving the vport; more than one when it is scaled out
    (`set_instances`), and then (`switch`, `port`) is the first of them.
    """

    vport: int
    switch: str
    port: int
    name: str | None = None
    instances: list[tuple[str, int]] = field(default_factory=list, hash=False)
    weights: list[int] = field(default_factory=list, hash=False)  # per instance (empty: an older OneSwitch)
    # (switch, port, until_ms): ports that left the vport and stay ingress-only (draining) until then
    draining: list[tuple[str, int, int]] = field(default_factory=list, hash=False)


@dataclass(frozen=True)
class Health:
    ok: bool
    switches: dict[str, str]  # switch id -> "connected" | ...
    controllers: list[Any] = field(default_factory=list)

    def all_connected(self) -> bool:
        return bool(self.switches) and all(v == "connected" for v in self.switches.values())


@dataclass(frozen=True)
class RemapResult:
    vport: int
    from_: dict
    to: dict
    rules: int
    duration_ms: float
    # Where OneSwitch's time went: translating + planning until the first physical message, then per barriered
    # phase {"phase", "ms", "messages": {switch: n}, "barrier_ms": {switch: ms}} (absent from older OneSwitch).
    plan_ms: float | None = None
    phases: tuple = ()


def _remap_result(r: dict, from_: dict, to: dict, ms_key: str = "duration_ms") -> RemapResult:
    return RemapResult(
        vport=int(r["vport"]),
        from_=from_,
        to=to,
        rules=int(r.get("rules", 0)),
        duration_ms=float(r.get(ms_key, 0.0)),
        plan_ms=r.get("plan_ms"),
        phases=tuple(r.get("phases", ())),
    )


@dataclass(frozen=True)
class PhysicalRule:
    switch: str
    table: int
    priority: int
    match: str
    actions: str


@dataclass(frozen=True)
class VirtualRule:
    table: int
    priority: int
    cookie: int
    match: str
    instructions: str
    physical: tuple[PhysicalRule, ...]
    raw: dict = field(compare=False, repr=False, default_factory=dict)


@dataclass(frozen=True)
class TableState:
    """Where virtual table `table` runs (OneSwitch's `GET /v1/tables`): "everywhere" (at each packet's
    ingress switch), "host" or an sNIC's switch id; its virtual rules, the physical rules per switch, and per
    sNIC `offload`: None when it could take the table, else OneSwitch's reason it cannot."""

    table: int
    location: str
    rules: int
    physical: dict[str, int]
    offload: dict[str, str | None]
    host_min_priority: int | None = None  # split: the host keeps the rules of at least this priority


@dataclass(frozen=True)
class TableMove:
    """A table move OneSwitch made (make-before-break): from, to, its rules, the time and its phases."""

    table: int
    from_: str
    to: str
    rules: int
    ms: float
    phases: Any = None


class OneSwitchClient(RestClient):
    """`base` is OneSwitch's REST address, `http://127.0.0.1:PORT` (as `uno status --json` reports it)."""

    what = "OneSwitch"
    error = OneSwitchError

    def _get(self, path: str) -> Any:
        return self.request("GET", path)[1]

    # -- API --------------------------------------------------------------------------------------------
    def health(self) -> Health:
        h = self._get("/v1/health")
        return Health(
            ok=bool(h.get("ok")), switches=dict(h.get("switches", {})), controllers=h.get("controllers", [])
        )

    def switches(self) -> list[dict]:
        return self._get("/v1/switches")

    def ports(self) -> list[PortMapping]:
        return [_mapping(p) for p in self._get("/v1/ports")]

    def map_port(self, vport: int, switch: str, port: int, name: str | None = None) -> bool:
        """Map `vport`; True if newly mapped (201), False if it already was exactly so (200)."""
        body: dict[str, Any] = {"switch": switch, "port": port}
        if name is not None:
            body["name"] = name
        status, _ = self.request("PUT", f"/v1/ports/{vport}", body)
        return status == 201

    def unmap_port(self, vport: int) -> None:
        self.request("DELETE", f"/v1/ports/{vport}")

    def remap(self, vport: int, switch: str, port: int, drain_ms: int | None = None) -> RemapResult:
        """Make-before-break remap; returns once every physical switch has answered its barriers.

        The old port stays an ingress-only (draining) port of `vport` for `drain_ms` (0..60000; None =
        OneSwitch's default, 2000): what the old instance still emits is forwarded as in_port=vport."""
        body: dict[str, Any] = {"switch": switch, "port": port}
        if drain_ms is not None:
            body["drain_ms"] = drain_ms
        r = self.request("POST", f"/v1/ports/{vport}/remap", body)[1]
        return _remap_result(r, r.get("from", {}), r.get("to", {}))

    def prepare(self, vport: int, switch: str, port: int, ms: int | None = None) -> RemapResult:
        """Make (switch, port) an ingress-only port of `vport` for `ms` (1..60000; None = OneSwitch's default,
        10000) ahead of a remap to it: its rules are installed and barriered now, so the remap only re-points
        the senders (one barrier round). Returns once every switch sent something has answered its barrier;
        `to` is {"switch", "port", "until_ms"}."""
        body: dict[str, Any] = {"switch": switch, "port": port}
        if ms is not None:
            body["ms"] = ms
        r = self.request("POST", f"/v1/ports/{vport}/prepare", body)[1]
        return _remap_result(r, {}, {k: r.get(k) for k in ("switch", "port", "until_ms")})

    def set_instances(
        self,
        vport: int,
        instances: list[tuple[str, int]],
        drain_ms: int | None = None,
        weights: list[int] | None = None,
    ) -> RemapResult:
        """Serve `vport` by every (switch, port) of `instances` (1..16, distinct): OneSwitch's select group
        spreads the flows sent to it, one flow sticking to one instance. Applied make-before-break like
        `remap` and returns once every switch answered its barriers; one instance is a plain remap.
        `RemapResult.to` is {"instances": [{"switch", "port"}, ...]}, `from_` is empty. A removed instance's
        port drains for `drain_ms` as in `remap`. `weights`: each instance's select bucket weight (1..65535;
        None: all equal, the hash alone decides); OVS gives a flow the bucket with the highest hash x weight,
        so raising one weight moves flows only to that instance. Only the weights changed: the groups are
        modified in place (no drain)."""
        body: dict[str, Any] = {"instances": [{"switch": sw, "port": port} for sw, port in instances]}
        if drain_ms is not None:
            body["drain_ms"] = drain_ms
        if weights is not None:
            body["weights"] = list(weights)
        r = self.request("PUT", f"/v1/ports/{vport}/instances", body)[1]
        return _remap_result(r, {}, {"instances": r.get("instances", [])}, ms_key="ms")

    def rules(self) -> list[VirtualRule]:
        return [_rule(r) for r in self._get("/v1/rules")]

    def metrics(self) -> str:
        return self._get("/metrics")

    # -- tables (switching offload) ----------------------------------------------------------------------
    def tables(self) -> list[TableState]:
        """Every virtual table that has rules, where it runs. TablesUnsupported when OneSwitch has no such
        endpoint (an older OneSwitch)."""
        try:
            rows = self._get("/v1/tables")
        except OneSwitchError as exc:
            if exc.status in (404, 405):
                raise TablesUnsupported(str(exc)) from None
            raise
        return [_table(r) for r in rows]

    def move_table(
        self, table: int, location: str, drain_ms: int | None = None, host_min_priority: int | None = None
    ) -> TableMove:
        """Run `table` at `location` ("host", an sNIC's switch, or "everywhere"), make-before-break; returns
        once OneSwitch has switched over. With `host_min_priority` P (`location` an sNIC) the table is split:
        the host keeps its rules of priority >= P for its own packets, the sNIC runs the whole table.
        TableRefused (409) when OneSwitch will not offload it (its reason): nothing changed then."""
        body: dict[str, Any] = {"location": location}
        if host_min_priority is not None:
            body["host_min_priority"] = host_min_priority
        if drain_ms is not None:
            body["drain_ms"] = drain_ms
        try:
            r = self.request("PUT", f"/v1/tables/{table}", body)[1]
        except OneSwitchError as exc:
            if exc.status == 409:
                raise TableRefused(str(table), exc.error) from None
            if exc.status == 405:
                raise TablesUnsupported(str(exc)) from None
            raise
        return TableMove(int(r.get("table", table)), str(r.get("from", "")), str(r.get("to", location)),
                         int(r.get("rules", 0)), float(r.get("ms", 0.0)), r.get("phases"))  # fmt: skip


def _mapping(p: dict) -> PortMapping:
    inst = [(str(i["switch"]), int(i["port"])) for i in p.get("instances") or []]
    return PortMapping(
        vport=int(p["vport"]),
        switch=p["switch"],
        port=int(p["port"]),
        name=p.get("name"),
        instances=inst or [(p["switch"], int(p["port"]))],
        weights=[int(w) for w in p.get("weights") or []],
        draining=[(str(d["switch"]), int(d["port"]), int(d["until_ms"])) for d in p.get("draining") or []],
    )


def _table(r: dict) -> TableState:
    return TableState(
        table=int(r["table"]),
        location=str(r.get("location", "everywhere")),
        rules=int(r.get("rules", 0)),
        physical={str(k): int(v) for k, v in (r.get("physical") or {}).items()},
        offload={str(k): (None if v is None else str(v)) for k, v in (r.get("offload") or {}).items()},
        host_min_priority=None if r.get("host_min_priority") is None else int(r["host_min_priority"]),
    )


def _rule(r: dict) -> VirtualRule:
    phys = tuple(
        PhysicalRule(
            switch=p.get("switch", ""),
            table=int(p.get("table", 0)),
            priority=int(p.get("priority", 0)),
            match=str(p.get("match", "")),
            actions=str(p.get("actions", "")),
        )
        for p in r.get("physical", [])
    )
    return VirtualRule(
        table=int(r.get("table", 0)),
        priority=int(r.get("priority", 0)),
        cookie=_int(r.get("cookie", 0)),
        match=str(r.get("match", "")),
        instructions=str(r.get("instructions", r.get("actions", ""))),
        physical=phys,
        raw=r,
    )


def _int(v: Any) -> int:
    if isinstance(v, str):
        return int(v, 16) if v.lower().startswith("0x") else int(v)
    return int(v)
