"""The sNIC agent's REST API (`/v1`, JSON), the only way the host reaches what runs on the sNIC.

Every path needs `Authorization: Bearer TOKEN`. Errors are JSON `{"error": "...", "field"?: "..."}`: 400
invalid field, 401 token, 404 unknown, 405 method, 409 conflict (`config`: the NF takes a restart for that config),
413 body too large, 500 failure on the sNIC (the state is unchanged), 502 the NF itself did not answer.
"""

from __future__ import annotations

import logging
import threading

from flask import Flask, Response, request

from domain.errors import ConfigRejected, NotFound, RestartNeeded, StartError, StateError, ValidationError
from host_datapath.sysutil import DatapathError
from restkit.jsonapi import bearer_refused, install_errors, query_arg
from restkit.jsonapi import error_response as _error
from restkit.jsonapi import json_response as _json
from restkit.jsonapi import read_body as _body
from snic_agent.service import SnicAgent

log = logging.getLogger("uno.snic")
MAX_BODY = 64 << 20  # a state import (PUT .../nf/state) can be large
NF_CALLS = {("GET", "stats"), ("GET", "health"), ("POST", "drain"), ("GET", "state"), ("PUT", "state"),
            ("POST", "release"), ("POST", "hold")}  # fmt: skip


def _flag(name: str) -> bool:
    raw = query_arg(name, "0")
    if raw not in ("0", "1"):
        raise ValidationError(name, "must be 0 or 1")
    return raw == "1"


def _interval() -> float:
    raw = query_arg("interval_ms", "10")
    try:
        ms = int(raw)
    except ValueError:
        raise ValidationError("interval_ms", f"must be an integer, not {raw!r}") from None
    if not 1 <= ms <= 10_000:
        raise ValidationError("interval_ms", "must be in [1, 10000]")
    return ms / 1000


def create_app(agent: SnicAgent, token: str, stop: threading.Event | None = None) -> Flask:
    app = Flask("uno-snic-agent")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY

    @app.before_request
    def _auth():
        return bearer_refused(token)

    install_errors(app, log)

    @app.errorhandler(ConfigRejected)
    def _config(exc: ConfigRejected):
        return _error(400, f"the NF refused its config: {exc}", "config")

    @app.errorhandler(RestartNeeded)
    def _restart(exc: RestartNeeded):
        return _error(409, f"the NF takes a restart for this config: {exc}", "config")

    @app.errorhandler(StartError)
    def _start(exc: StartError):
        return _error(500, str(exc))

    @app.errorhandler(StateError)
    def _state(exc: StateError):
        return _error(502, str(exc))

    @app.errorhandler(DatapathError)
    def _datapath(exc: DatapathError):
        return _error(500, str(exc))

    @app.get("/v1/health")
    def health():
        return _json({"ok": True, "snic": agent.cfg.snic, "boot_id": agent.boot_id,
                      "instances": len(agent.records)})  # fmt: skip

    @app.get("/v1/info")
    def info():
        return _json(agent.info())

    @app.get("/v1/ports")
    def ports():
        return _json(agent.ports())

    @app.get("/v1/port-counters")
    def port_counters():
        return _json(agent.port_counters_at())

    @app.get("/v1/heartbeat")
    def heartbeat():
        interval = _interval()
        return Response(agent.beats(interval, stop), mimetype="application/x-ndjson")

    @app.get("/v1/instances")
    def list_instances():
        return _json(agent.instances(health=_flag("health"), counters=_flag("counters")))

    @app.post("/v1/instances")
    def start():
        return _json(agent.start(agent.parse_start(_body())), 201)

    @app.get("/v1/instances/<inst_id>")
    def get_instance(inst_id: str):
        counters = _flag("counters")
        with agent.lock:
            rec = agent.record(inst_id)
        return _json(agent.view(rec, health=True, ports=agent.port_counters() if counters else None))

    @app.delete("/v1/instances/<inst_id>")
    def delete_instance(inst_id: str):
        agent.stop(inst_id)
        return _json({"deleted": inst_id})

    @app.post("/v1/instances/<inst_id>/stop")
    def stop_processes(inst_id: str):
        _no_body()
        return _json(agent.stop_processes(inst_id))

    @app.post("/v1/instances/<inst_id>/start")
    def start_processes(inst_id: str):
        _no_body()
        return _json(agent.start_processes(inst_id))

    @app.put("/v1/instances/<inst_id>/config")
    def put_config(inst_id: str):
        """The body is the NF's whole new config, applied in place (see `SnicAgent.reconfigure`)."""
        with agent.lock:
            agent.record(inst_id)  # 404 before 400
        return _json(agent.reconfigure(inst_id, agent.parse_config(_body())))

    @app.get("/v1/nf-versions")
    def nf_versions():
        return _json(agent.nf_versions())

    @app.get("/v1/nf-versions/<name>")
    def nf_version(name: str):
        return _json(agent.versions.describe(name))

    @app.put("/v1/nf-versions/<name>")
    def put_nf_version(name: str):
        """The body is the nf binary itself (application/octet-stream), `?sha256=` its digest."""
        sha = query_arg("sha256", "")
        desc, created = agent.put_nf_version(name, request.get_data(cache=False), sha)
        return _json(desc, 201 if created else 200)

    @app.delete("/v1/nf-versions/<name>")
    def delete_nf_version(name: str):
        agent.delete_nf_version(name)
        return _json({"deleted": name})

    # every method routed here: one not allowed for the call is answered with the call's own Allow
    @app.route("/v1/instances/<inst_id>/nf/<call>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    def nf_call(inst_id: str, call: str):
        """The instance's own endpoint (stats, health, drain, state, release, hold), relayed."""
        if (request.method, call) not in NF_CALLS:
            allowed = sorted(m for m, c in NF_CALLS if c == call)
            if not allowed:
                raise NotFound(f"no NF call {call!r} (stats, health, drain, state, release, hold)")
            return _error(405, f"{call} takes {', '.join(allowed)}", headers={"Allow": ", ".join(allowed)})
        inst = agent.instance(inst_id)
        nfs = agent.nfs
        if call == "health":
            return _json({"healthy": nfs.healthy(inst, timeout=_timeout(1.0))})
        if call == "stats":
            st = nfs.stats(inst)
            if st is None:
                return _error(502, f"{inst_id}: its stats endpoint did not answer")
            return _json(st)
        if call == "drain":
            quiet = _int_arg("quiet_ms", 20, 0, 60_000)
            timeout_s = _int_arg("timeout_ms", 500, 1, 60_000) / 1000
            ans = nfs.drain(inst, quiet, timeout_s, flush=_int_arg("flush", 0, 0, 1) == 1)
            return _json({"answer": ans})
        if call == "state" and request.method == "GET":
            data = nfs.get_state(inst, timeout=_timeout(60.0))
            return Response(data, mimetype="application/octet-stream")
        if call == "state":
            data = request.get_data(cache=False)
            return _json(nfs.put_state(inst, data, timeout=_timeout(60.0)))
        if call == "hold":
            return _json(nfs.hold(inst, _int_arg("buffer", 0, 1, 10_000_000), timeout=_timeout(10.0)))
        return _json(nfs.release(inst, timeout=_timeout(60.0)))

    return app


def _no_body() -> None:
    if request.get_data(cache=False) not in (b"", b"{}"):
        raise ValidationError("body", "takes no body (or {})")


def _int_arg(name: str, default: int, lo: int, hi: int) -> int:
    raw = query_arg(name, str(default))
    try:
        v = int(raw)
    except ValueError:
        raise ValidationError(name, f"must be an integer, not {raw!r}") from None
    if not lo <= v <= hi:
        raise ValidationError(name, f"must be in [{lo}, {hi}]")
    return v


def _timeout(default: float) -> float:
    return _int_arg("timeout_ms", int(default * 1000), 1, 600_000) / 1000
