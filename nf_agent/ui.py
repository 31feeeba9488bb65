"""The operator's web view: the static page at `/ui` and the two feeds it reads beside the REST API,
`/v1/host` (the host's shape: sNICs with their capacity and PCIe budget, VMs, wire ports) and `/v1/events`
(what the agent recorded: placement runs, moves, failovers, restarts, ...).

The page's files hold no data, so `/ui` is open like `/v1/health`; the page asks for the agent's token (when
it has one), keeps it in the tab's sessionStorage and sends it as `Authorization: Bearer` on every fetch.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, redirect, send_from_directory

from domain.errors import ValidationError
from restkit.jsonapi import json_response, query_args

STATIC = Path(__file__).resolve().parent / "ui_static"
OPEN_PREFIX = "/ui"
EVENTS_MAX = 500


def is_open(path: str) -> bool:
    """The page's own files need no token (they carry no state)."""
    return path == OPEN_PREFIX or path.startswith(OPEN_PREFIX + "/")


def parse_since(raw: str | None) -> float | None:
    """`?since=T`: only events recorded after agent time T (seconds, as in each event's `t`)."""
    if raw is None:
        return None
    try:
        since = float(raw)
    except ValueError:
        raise ValidationError("since", "expected a number (seconds)") from None
    if since != since or since in (float("inf"), float("-inf")):
        raise ValidationError("since", "expected a finite number")
    return since


def host_view(agent) -> dict:
    """The host's shape for drawing it: locations, sNICs (capacity in placement units, PCIe Gbit/s per
    direction, Ethernet ports, down or not), VMs."""
    ctx = agent.ctx
    with ctx.lock:
        return {
            "locations": list(ctx.locations),
            "snics": [
                {
                    "id": s.id,
                    "capacity": s.capacity,
                    "pcie_gbps": s.pcie_gbps,
                    "eth_ports": s.eth_ports,
                    "down": s.id in ctx.down,
                }
                for s in ctx.cfg.snics
            ],
            "vms": sorted(ctx.state.vms),
            "t": round(ctx.clock(), 3),
        }


def events_view(agent, since: float | None) -> dict:
    with agent.lock:
        events = [e for e in agent.state.history if since is None or e.get("t", 0) > since]
    return {"events": events[-EVENTS_MAX:]}


def ui_blueprint(agent) -> Blueprint:
    bp = Blueprint("uno_ui", __name__)

    @bp.get(OPEN_PREFIX)
    def ui_root():
        return redirect(OPEN_PREFIX + "/", 302)

    @bp.get(OPEN_PREFIX + "/")
    def ui_index():
        return send_from_directory(STATIC, "index.html", max_age=0)

    @bp.get(OPEN_PREFIX + "/<path:name>")
    def ui_file(name: str):
        return send_from_directory(STATIC, name, max_age=0)

    @bp.get("/v1/host")
    def host():
        return json_response(host_view(agent))

    @bp.get("/v1/events")
    def events():
        args = query_args({"since"})
        return json_response(events_view(agent, parse_since(args.get("since"))))

    return bp
