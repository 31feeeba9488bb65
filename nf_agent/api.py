"""The agent's northbound REST API (`/v1`, JSON) on Flask.

Errors are JSON `{"error": "...", "field": "..."}`: 400 invalid field, 401 token, 404 unknown, 405 method,
409 conflict (also: valid but not supported yet, e.g. scale-out), 413 body too large, 500/502 server-side
failure (the state is unchanged).
`/v1/health` and `/v1/openapi.json` are open; everything else needs `Authorization: Bearer TOKEN` when the
agent has a token.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, request

from domain.errors import DependencyFailed, NotFound, NotSupported, OperationFailed
from nf_agent import validation
from nf_agent.metrics import Metrics
from nf_agent.openapi import spec
from nf_agent.service import Agent
from nf_agent.ui import is_open, ui_blueprint
from nf_agent.update import UpdateRequest
from restkit.jsonapi import bearer_refused, install_errors
from restkit.jsonapi import error_response as _error
from restkit.jsonapi import json_response as _json
from restkit.jsonapi import read_body as _body

log = logging.getLogger("uno.agent")
MAX_BODY = 1 << 20
OPEN_PATHS = {"/v1/health", "/v1/openapi.json"}


def failure_status(exc: OperationFailed) -> int:
    """502 when a part the agent depends on (OneSwitch, an NF instance) refused or did not answer, else 500."""
    return 502 if isinstance(exc, DependencyFailed) else 500


def create_app(agent: Agent, token: str | None = None) -> Flask:
    app = Flask("uno-agent")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    metrics = Metrics(agent)
    app.extensions["uno_metrics"] = metrics

    @app.before_request
    def _auth():
        if token is None or request.path in OPEN_PATHS or is_open(request.path):
            return None
        return bearer_refused(token)

    @app.after_request
    def _count(resp: Response):
        rule = request.url_rule.rule if request.url_rule else "unknown"
        metrics.requests.labels(request.method, rule, str(resp.status_code)).inc()
        if request.method != "GET":
            log.info(
                "request",
                extra={
                    "fields": {"method": request.method, "path": request.path, "status": resp.status_code}
                },
            )
        return resp

    install_errors(app, log)

    @app.errorhandler(NotSupported)
    def _unsupported(exc: NotSupported):
        return _error(409, str(exc), exc.field)

    @app.errorhandler(OperationFailed)
    def _failed(exc: OperationFailed):
        return _error(failure_status(exc), str(exc))

    # -- routes ---------------------------------------------------------------------------------------
    @app.get("/v1/health")
    def health():
        h = agent.health()
        return _json(h, 200 if h["ok"] else 503)

    @app.get("/v1/openapi.json")
    def openapi():
        return _json(spec())

    @app.get("/metrics")
    def prometheus():
        return Response(metrics.render(), mimetype="text/plain; version=0.0.4")

    @app.get("/v1/vms")
    def list_vms():
        with agent.lock:
            return _json(
                [{"id": v.id, "vport": v.vport, "tenant": v.tenant} for v in agent.state.vms.values()]
            )

    @app.post("/v1/vms")
    def create_vm():
        vm = agent.create_vm(validation.parse_vm(_body()))
        return _json({"id": vm.id, "vport": vm.vport}, 201)

    @app.get("/v1/vms/<vm_id>")
    def get_vm(vm_id: str):
        with agent.lock:
            vm = agent.state.vms.get(vm_id)
        if vm is None:
            raise NotFound(f"no VM {vm_id!r}")
        return _json({"id": vm.id, "vport": vm.vport, "tenant": vm.tenant})

    @app.delete("/v1/vms/<vm_id>")
    def delete_vm(vm_id: str):
        agent.delete_vm(vm_id)
        return _json({"deleted": vm_id})

    @app.get("/v1/nfs")
    def list_nfs():
        with agent.lock:
            return _json([n.public() for n in agent.state.nfs.values()])

    @app.post("/v1/nfs")
    def create_nf():
        nf = agent.create_nf(validation.parse_nf(_body(), agent.locations))
        return _json({"id": nf.id, "vport": nf.vport}, 201, {"Location": f"/v1/nfs/{nf.id}"})

    @app.get("/v1/nfs/<nf_id>")
    def get_nf(nf_id: str):
        with agent.lock:
            out = agent.nf(nf_id).public()
        # predicted per-packet latency: the NF's own where it runs, and its chain's (None: not placed)
        return _json(out | {"latency": agent.nf_latency(nf_id)})

    @app.patch("/v1/nfs/<nf_id>")
    def update_nf(nf_id: str):
        with agent.lock:
            agent.nf(nf_id)  # 404 before 400
        changes = validation.parse_nf_update(_body())
        config = changes.pop("config", None)
        if config is not None:
            agent.check_config(nf_id, config)  # 400 before anything changes
        if changes:
            agent.update_nf(nf_id, changes)
        applied = agent.configure_nf(nf_id, config) if config is not None else None
        with agent.lock:
            out = agent.nf(nf_id).public()
        out["latency"] = agent.nf_latency(nf_id)  # as GET /v1/nfs/ID shows it
        return _json(out | ({"config_applied": applied["applied"]} if applied else {}))

    @app.post("/v1/nfs/<nf_id>/update")
    def live_update(nf_id: str):
        with agent.lock:
            agent.nf(nf_id)  # 404 before 400
        version, binary, config = validation.parse_update(_body())
        return _json(agent.update(nf_id, UpdateRequest(version, binary, config)))

    @app.get("/v1/nf-versions")
    def nf_versions():
        return _json(agent.versions.listing())

    @app.delete("/v1/nfs/<nf_id>")
    def delete_nf(nf_id: str):
        with agent.lock:
            agent.nf(nf_id)  # 404 before 400
        drop = validation.parse_delete_query(request.args)
        dropped = agent.delete_nf(nf_id, drop_state=drop)
        return _json({"deleted": nf_id, **({"state_keys_dropped": dropped} if drop else {})})

    @app.post("/v1/nfs/<nf_id>/standby")
    def start_standby(nf_id: str):
        with agent.lock:
            agent.nf(nf_id)  # 404 before 400
        loc = validation.parse_standby(_body(optional=True), agent.locations)
        agent.start_standby(nf_id, loc)
        return _json({"id": nf_id, "standby": True}, 201)

    @app.delete("/v1/nfs/<nf_id>/standby")
    def stop_standby(nf_id: str):
        agent.stop_standby(nf_id)
        return _json({"id": nf_id, "standby": False})

    @app.post("/v1/nfs/<nf_id>/restart")
    def restart(nf_id: str):
        with agent.lock:
            agent.nf(nf_id)  # 404 before 400
        validation.parse_restart(_body(optional=True))
        return _json(agent.restart_nf(nf_id))

    @app.post("/v1/nfs/<nf_id>/migrate")
    def migrate(nf_id: str):
        with agent.lock:
            agent.nf(nf_id)  # 404 before 400
        return _json(agent.migrate_request(nf_id, validation.parse_migrate(_body(), agent.locations)))

    @app.post("/v1/nfs/<nf_id>/scale")
    def scale(nf_id: str):
        with agent.lock:
            agent.nf(nf_id)
        return _json(agent.scale(nf_id, validation.parse_scale(_body())))

    @app.get("/v1/ports")
    def ports():
        return _json(agent.ports())

    @app.get("/v1/chains")
    def chains():
        return _json(agent.chains())

    @app.get("/v1/placement")
    def placement():
        return _json(agent.placement_view())

    @app.post("/v1/placement/run")
    def placement_run():
        force = validation.parse_run(_body(optional=True))
        return _json(agent.run_placement(force=force).to_json())

    @app.get("/v1/tables")
    def tables():
        return _json(agent.tables())

    @app.post("/v1/tables/place")
    def tables_place():
        validation.parse_run(_body(optional=True))
        return _json(agent.place_tables())

    @app.put("/v1/tables/<int:table_id>")  # an int route: /v1/tables/place stays POST only
    def table_pin(table_id: int):
        table = validation.parse_table(str(table_id))
        return _json(agent.pin_table(table, *validation.parse_table_pin(_body())))

    app.register_blueprint(ui_blueprint(agent))
    return app
