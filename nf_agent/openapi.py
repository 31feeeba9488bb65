"""The OpenAPI 3 description of the agent's REST API, served at /v1/openapi.json (tests keep it in step)."""

from __future__ import annotations

from domain.model import NF_TYPES
from nf_agent.validation import MAX_GBPS, MAX_INSTANCES, MAX_LATENCY_US

NAME = {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,31}$"}
LOCATION = {"type": "string", "pattern": "^(host|snic[0-9]{1,2})$"}
# Optional request fields where the API takes null as "not given" (model.parse_nf): the spec says so.
OPT_NAME = {**NAME, "type": ["string", "null"]}
OPT_LOCATION = {**LOCATION, "type": ["string", "null"]}
# Gbit/s on one PCIe link per direction (up: sNIC -> host, down: host -> sNIC)
PCIE_DIRECTIONS = {
    "type": "object",
    "required": ["up", "down"],
    "properties": {"up": {"type": "number", "minimum": 0}, "down": {"type": "number", "minimum": 0}},
}


# An NF's traffic expectation (POST and PATCH /v1/nfs): the placement graph's chain src -> NF -> dst.
EXPECTED = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "gbps": {"type": "number", "minimum": 0, "maximum": MAX_GBPS},
        "src": OPT_NAME,
        "dst": OPT_NAME,
        "latency_us": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_LATENCY_US},
    },
    "description": "expected traffic src -> NF -> dst (vertices: VM id, NF id, snicK-ethJ; default: the first "
    "sNIC Ethernet port); a chain of NFs is declared by naming each NF's neighbours, with PATCH /v1/nfs/ID "
    "once they all exist; latency_us: per-packet latency SLO of the chain through this NF (its first to its "
    "last vertex; the smallest of its NFs' holds), kept by placement",
}

# An NF's autoscaling (POST and PATCH /v1/nfs; nf_agent/autoscale.py); null: a fixed instance count.
AUTOSCALE = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["min", "max", "target_util"],
    "properties": {
        "min": {"type": "integer", "minimum": 1, "maximum": MAX_INSTANCES},
        "max": {"type": "integer", "minimum": 1, "maximum": MAX_INSTANCES},
        "target_util": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    },
    "description": "instances between min and max (min <= max), resized by the agent from the measured load so "
    "that each instance's CPU share stays near target_util of one core (hysteresis: docs/rest.md)",
}

# Load-aware spread of a scaled-out NF's flows (POST and PATCH /v1/nfs; nf_agent/balance.py).
BALANCE = {
    "type": "boolean",
    "default": True,
    "description": "with more than one instance, the agent raises the select bucket weight of an instance that "
    "gets less than 0.75/k of the measured packets (order-preserving, hysteresis: docs/rest.md); false: the "
    "flow hash alone spreads the flows",
}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _resp(desc: str, schema: dict | None = None) -> dict:
    r: dict = {"description": desc}
    if schema is not None:
        r["content"] = {"application/json": {"schema": schema}}
    return r


ERR = _resp("error", _ref("Error"))
ID_PARAM = [{"name": "id", "in": "path", "required": True, "schema": NAME}]


def _body(schema: dict, required: bool = True) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict:
    return {str(c): ERR for c in codes}


def spec() -> dict:
    schemas = {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}, "field": {"type": "string"}},
        },
        "VmCreate": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id"],
            "properties": {"id": NAME, "tenant": {**NAME, "description": "default: default"}},
        },
        "Vm": {
            "type": "object",
            "required": ["id", "vport"],
            "properties": {"id": NAME, "vport": {"type": "integer"}, "tenant": NAME},
        },
        "NfCreate": {
            "type": "object",
            "additionalProperties": False,
            "required": ["type"],
            "properties": {
                "id": OPT_NAME,
                "type": {"type": "string", "enum": list(NF_TYPES)},
                "config": {"type": "object", "description": "the NF's JSON config (nfs/README.md)"},
                "expected": EXPECTED,
                "pin": OPT_LOCATION,
                "hints": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"prefer": OPT_LOCATION},
                },
                "tenant": {
                    **NAME,
                    "description": "its state's owner: keys tn:<tenant>:..., the tenant's ACL user",
                },
                "durability": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "wait": {
                            "type": ["integer", "string", "null"],
                            "description": "replicas acknowledging each batch's writes before its packets "
                            'leave: 1-16 or "N:MS"; null or absent: none',
                        }
                    },
                },
                "autoscale": AUTOSCALE,
                "balance": BALANCE,
            },
        },
        "NfUpdate": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {
                "expected": {**EXPECTED, "minProperties": 1},
                "config": {
                    "type": "object",
                    "description": "the NF's whole new config (nfs/README.md), checked by its nf binary first (400 "
                    "names the field, nothing changes); applied in place where the NF can (firewall rules, default, "
                    "timeouts: no restart), else by a rolling update with the same version",
                },
                "autoscale": AUTOSCALE,
                "balance": BALANCE,
            },
            "description": "a key of expected not given stays as it is; a null src/dst goes back to the default; "
            "a null autoscale turns autoscaling off",
        },
        "LiveUpdate": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "version": {
                    "type": "string",
                    "minLength": 1,
                    "description": "a version of GET /v1/nf-versions",
                },
                "binary": {"type": "string", "minLength": 1, "description": "an nf binary by absolute path"},
                "config": {"type": "object", "description": "a new config to roll with (checked first)"},
            },
            "oneOf": [{"required": ["version"]}, {"required": ["binary"]}],
            "description": "roll every instance to this version; a rollback is the same call with the NF's "
            "previous_version",
        },
        "Updated": {
            "type": "object",
            "required": ["id", "version", "replaced"],
            "properties": {
                "id": NAME,
                "version": {"type": "string"},
                "previous_version": {"type": ["string", "null"]},
                "replaced": {"type": "array", "items": {"type": "object"}},
            },
        },
        "NfVersion": {
            "type": "object",
            "required": ["binary", "default"],
            "properties": {
                "version": {"type": ["string", "null"]},
                "binary": {"type": "string"},
                "default": {"type": "boolean"},
                "schema": {"type": "object", "description": "state record layouts written/read per NF type"},
                "error": {"type": "string"},
            },
        },
        "Created": {
            "type": "object",
            "required": ["id", "vport"],
            "properties": {"id": NAME, "vport": {"type": "integer"}},
            "description": "names only the virtual port",
        },
        "Chain": {
            "type": "object",
            "required": ["id", "vertices", "locations", "predicted_latency_us", "slo_us", "pcie_crossings"],
            "properties": {
                "id": {"type": "string"},
                "vertices": {"type": "array", "items": {"type": "string"}},
                "locations": {"type": "array", "items": LOCATION},
                "predicted_latency_us": {"type": "number", "minimum": 0},
                "slo_us": {"type": ["number", "null"]},
                "within_slo": {"type": ["boolean", "null"]},
                "pcie_crossings": {"type": "integer", "minimum": 0},
            },
        },
        "Nf": {
            "type": "object",
            "required": ["id", "type", "vport", "instances"],
            "properties": {
                "id": NAME,
                "type": {"type": "string"},
                "vport": {"type": "integer"},
                "pin": {"type": ["string", "null"]},
                "hints": {"type": "object"},
                "expected": {"type": "object"},
                "config": {"type": "object"},
                "tenant": NAME,
                "durability": {"type": "object"},
                "autoscale": {"type": ["object", "null"]},
                "balance": {"type": "boolean"},
                "version": {
                    "type": ["string", "null"],
                    "description": "null: never updated (default binary)",
                },
                "previous_version": {"type": ["string", "null"], "description": "a rollback's target"},
                "config_applied": {"type": "string", "enum": ["in-place", "rolling"]},
                "latency": {
                    "type": ["object", "null"],
                    "description": "predicted per-packet latency (us): the NF's own where it runs (`nf_us`, its "
                    "type's measured profile) and its chain's row (as GET /v1/chains); null: not placed",
                },
                "instance_count": {"type": "integer", "minimum": 0, "maximum": MAX_INSTANCES},
                "instances": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "location": LOCATION,
                            "state": {"type": "string", "enum": ["starting", "running", "failed"]},
                            "restarts": {"type": "integer"},
                        },
                    },
                },
            },
        },
        "Port": {
            "type": "object",
            "required": ["vport", "kind", "owner"],
            "properties": {
                "vport": {"type": "integer"},
                "kind": {"type": "string", "enum": ["vm", "nf", "eth"]},
                "owner": {"type": "string"},
            },
        },
        "Migrate": {
            "type": "object",
            "additionalProperties": False,
            "required": ["to"],
            "properties": {"to": LOCATION},
        },
        "Standby": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"location": LOCATION},
        },
        "Scale": {
            "type": "object",
            "additionalProperties": False,
            "required": ["instances"],
            "properties": {"instances": {"type": "integer", "minimum": 1, "maximum": MAX_INSTANCES}},
        },
        "Scaled": {
            "type": "object",
            "required": ["id", "instances", "locations", "changed"],
            "properties": {
                "id": NAME,
                "instances": {"type": "integer", "minimum": 1, "maximum": MAX_INSTANCES},
                "locations": {"type": "array", "items": LOCATION},
                "changed": {"type": "boolean"},
                "set_ms": {
                    "type": ["number", "null"],
                    "description": "OneSwitch's time to re-spread the vport",
                },
            },
        },
        "Table": {
            "type": "object",
            "required": [
                "table",
                "location",
                "rules",
                "split",
                "physical",
                "offload",
                "pin",
                "why",
                "planned",
            ],
            "properties": {
                "table": {"type": "integer", "minimum": 0, "maximum": 253},
                "location": {
                    "type": "string",
                    "description": "everywhere (each packet's ingress switch), host, or an sNIC",
                },
                "rules": {"type": "integer", "minimum": 0},
                "split": {
                    "description": "split on its sNIC (OneSwitch's host_min_priority): the priority and each "
                    "side's physical rules (the sNIC runs the whole table, the host its rules of at least that "
                    "priority for its own packets); null when not split",
                    "anyOf": [
                        {"type": "null"},
                        {
                            "type": "object",
                            "required": ["host_min_priority", "rules"],
                            "properties": {
                                "host_min_priority": {"type": "integer", "minimum": 1, "maximum": 65535},
                                "rules": {"type": "object", "additionalProperties": {"type": "integer"}},
                            },
                        },
                    ],
                },
                "physical": {"type": "object", "additionalProperties": {"type": "integer"}},
                "offload": {
                    "type": "object",
                    "additionalProperties": {"type": ["string", "null"]},
                    "description": "per sNIC: null when OneSwitch can take the table there, else its reason",
                },
                "pin": {"type": ["string", "null"]},
                "why": {
                    "description": "on the host only: why it is not offloaded",
                    "anyOf": [
                        {"type": "null"},
                        {
                            "type": "object",
                            "required": ["reason", "detail"],
                            "properties": {
                                "reason": {
                                    "type": "string",
                                    "enum": [
                                        "pinned",
                                        "refused by OneSwitch",
                                        "memory",
                                        "capacity",
                                        "pcie",
                                        "latency",
                                        "no gain",
                                        "pending",
                                        "no sNIC",
                                    ],
                                },
                                "detail": {"type": "string"},
                            },
                        },
                    ],
                },
                "planned": {
                    "type": ["string", "null"],
                    "description": "where the last table placement put it",
                },
            },
        },
        "TablePin": {
            "type": "object",
            "additionalProperties": False,
            "required": ["pin"],
            "properties": {
                "pin": {"type": ["string", "null"], "minLength": 1},
                "host_min_priority": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 65535,
                    "description": "with an sNIC pin: split the table there (the host keeps its rules of at "
                    "least this priority for its own packets, the sNIC runs the whole table)",
                },
            },
        },
        "Run": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"force": {"type": "boolean", "description": "bypass the dampening window"}},
        },
        "Placement": {
            "type": "object",
            "required": ["locations", "predicted", "measured", "traffic", "last_solve", "history"],
            "properties": {
                "locations": {"type": "object", "additionalProperties": LOCATION},
                "predicted": {
                    "type": ["object", "null"],
                    "description": "the model's host cores, sNIC load, PCIe Gbit/s and violations; `split`: per "
                    "NF running at several locations, each location's instances, traffic shares, load and cost",
                    "properties": {
                        "all_host_cores": {
                            "type": "number",
                            "description": "host cores the model predicts with every NF on the host",
                        },
                        "pcie_gbps": {
                            "type": "object",
                            "description": "per sNIC link, up/down: the NFs' crossings plus `background_gbps` "
                            "(comparable to `measured.pcie_gbps`)",
                            "additionalProperties": PCIE_DIRECTIONS,
                        },
                        "background_gbps": {
                            "type": "object",
                            "description": "per sNIC link, up/down: measured PCIe the model of the current "
                            "placement does not predict (traffic through no NF; 0 at or below a noise floor); "
                            "the solver gives the NFs only the rest of the link",
                            "additionalProperties": PCIE_DIRECTIONS,
                        },
                    },
                },
                "measured": {
                    "type": ["object", "null"],
                    "description": "rates from the counters; `nf_split_gbps`: such an NF's in/out per location",
                },
                "traffic": {"type": "array", "description": "the graph's edges (a split NF's as ID@LOC)"},
                "last_solve": {"type": ["object", "null"]},
                "history": {"type": "array"},
            },
        },
        "Host": {
            "type": "object",
            "required": ["locations", "snics", "vms", "t"],
            "properties": {
                "locations": {"type": "array", "items": LOCATION},
                "snics": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["id", "capacity", "pcie_gbps", "eth_ports", "down"],
                        "properties": {
                            "id": {"type": "string"},
                            "capacity": {"type": "number", "description": "placement units"},
                            "pcie_gbps": {"type": "number", "description": "the link's budget per direction"},
                            "eth_ports": {"type": "integer"},
                            "down": {"type": "boolean"},
                        },
                    },
                },
                "vms": {"type": "array", "items": {"type": "string"}},
                "t": {"type": "number", "description": "the agent's clock (seconds)"},
            },
        },
        "Events": {
            "type": "object",
            "required": ["events"],
            "properties": {
                "events": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["t", "event"],
                        "properties": {"t": {"type": "number"}, "event": {"type": "string"}},
                    },
                }
            },
        },
        "Decision": {
            "type": "object",
            "required": ["go", "why", "moves"],
            "properties": {
                "go": {"type": "boolean"},
                "why": {"type": "string"},
                "moves": {"type": "array"},
                "current_host_cost": {"type": ["number", "null"]},
                "new_host_cost": {"type": ["number", "null"]},
                "solve": {"type": ["object", "null"]},
            },
        },
        "Health": {
            "type": "object",
            "required": ["ok", "nfs", "store"],
            "properties": {
                "ok": {"type": "boolean"},
                "nfs": {"type": "object", "description": "NF id -> healthy | unhealthy | degraded: REASON"},
                "store": {
                    "type": "string",
                    "enum": ["ok", "unreachable", "local"],
                    "description": "the state tier (Redis) answering a PING; local: NFs keep their own state",
                },
            },
        },
    }
    paths = {
        "/v1/health": {
            "get": {
                "summary": "Agent and NF health",
                "security": [],
                "responses": {
                    "200": _resp("all NFs healthy", _ref("Health")),
                    "503": _resp("an NF is unhealthy, or the state tier unreachable", _ref("Health")),
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "summary": "This document",
                "security": [],
                "responses": {"200": _resp("OpenAPI 3", {"type": "object"})},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {
                    "200": {
                        "description": "text exposition format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    **_errors(401),
                },
            }
        },
        "/v1/vms": {
            "get": {
                "summary": "VMs",
                "responses": {"200": _resp("VMs", {"type": "array", "items": _ref("Vm")}), **_errors(401)},
            },
            "post": {
                "summary": "Bind a VM to a free VM slot of this host",
                "requestBody": _body(_ref("VmCreate")),
                "responses": {"201": _resp("created", _ref("Vm")), **_errors(400, 401, 409, 413)},
            },
        },
        "/v1/vms/{id}": {
            "parameters": ID_PARAM,
            "get": {"summary": "One VM", "responses": {"200": _resp("VM", _ref("Vm")), **_errors(401, 404)}},
            "delete": {
                "summary": "Release a VM",
                "responses": {"200": _resp("deleted", {"type": "object"}), **_errors(401, 404, 409)},
            },
        },
        "/v1/nfs": {
            "get": {
                "summary": "NFs",
                "responses": {"200": _resp("NFs", {"type": "array", "items": _ref("Nf")}), **_errors(401)},
            },
            "post": {
                "summary": "Create an NF: placed, started, its virtual port mapped; answers with the virtual port",
                "requestBody": _body(_ref("NfCreate")),
                "responses": {
                    "201": _resp("created", _ref("Created")),
                    **_errors(400, 401, 409, 413, 500, 502),
                },
            },
        },
        "/v1/nfs/{id}": {
            "parameters": ID_PARAM,
            "get": {"summary": "One NF", "responses": {"200": _resp("NF", _ref("Nf")), **_errors(401, 404)}},
            "patch": {
                "summary": "Change the NF's traffic expectation (its chain neighbours and Gbit/s in the placement "
                "model; nothing moves) and/or its config (in place without a restart where the NF can, else a "
                "rolling update; `config_applied` says which)",
                "requestBody": _body(_ref("NfUpdate")),
                "responses": {
                    "200": _resp("the NF as now", _ref("Nf")),
                    **_errors(400, 401, 404, 409, 413, 500, 502),
                },
            },
            "delete": {
                "summary": "Stop the NF, unmap its port, remove its namespace; NFs whose chain named it are "
                "spliced (a -> NF -> b becomes a -> b). Its state stays on the tier unless `drop_state=true`",
                "parameters": [
                    {
                        "name": "drop_state",
                        "in": "query",
                        "required": False,
                        "description": "also delete the NF's keys on the state tier (`tn:<tenant>:nf:<id>:*`; "
                        "every host sharing the tier loses them); the answer counts them",
                        "schema": {"type": "string", "enum": ["true", "false"]},
                    }
                ],
                "responses": {"200": _resp("deleted", {"type": "object"}), **_errors(400, 401, 404, 500)},
            },
        },
        "/v1/nfs/{id}/standby": {
            "parameters": ID_PARAM,
            "post": {
                "summary": "Pre-start a standby instance (unmapped) that a failover takes over without a start",
                "requestBody": _body(_ref("Standby"), required=False),
                "responses": {
                    "201": _resp("started", {"type": "object"}),
                    **_errors(400, 401, 404, 409, 500),
                },
            },
            "delete": {
                "summary": "Stop the NF's standby",
                "responses": {"200": _resp("stopped", {"type": "object"}), **_errors(401, 404)},
            },
        },
        "/v1/nfs/{id}/restart": {
            "parameters": ID_PARAM,
            "post": {
                "summary": "Restart every instance of the NF in place, its restart budget reset (revives a "
                "`failed` NF); 502 names an instance that did not come up (marked failed)",
                "requestBody": _body({"type": "object", "additionalProperties": False}, required=False),
                "responses": {
                    "200": _resp(
                        "restarted",
                        {
                            "type": "object",
                            "required": ["id", "restarted"],
                            "properties": {"id": NAME, "restarted": {"type": "array", "items": NAME}},
                        },
                    ),
                    **_errors(400, 401, 404, 413, 502),
                },
            },
        },
        "/v1/nfs/{id}/update": {
            "parameters": ID_PARAM,
            "post": {
                "summary": "Live update: roll every instance to another nf version (start beside, remap "
                "make-before-break, drain, stop; connections kept). 409 names why when the version cannot read "
                "the NF's state (or an instance runs on an sNIC); rollback: the same call with previous_version",
                "requestBody": _body(_ref("LiveUpdate")),
                "responses": {
                    "200": _resp("rolled", _ref("Updated")),
                    **_errors(400, 401, 404, 409, 413, 500, 502),
                },
            },
        },
        "/v1/nf-versions": {
            "get": {
                "summary": "The nf versions NFs can roll to: the default binary and the versions directory",
                "responses": {
                    "200": _resp("versions", {"type": "array", "items": _ref("NfVersion")}),
                    **_errors(401),
                },
            }
        },
        "/v1/nfs/{id}/migrate": {
            "parameters": ID_PARAM,
            "post": {
                "summary": "Move the NF (start at target, remap its virtual port, stop the old instance)",
                "requestBody": _body(_ref("Migrate")),
                "responses": {
                    "200": _resp("done", {"type": "object"}),
                    **_errors(400, 401, 404, 409, 500, 502),
                },
            },
        },
        "/v1/nfs/{id}/scale": {
            "parameters": ID_PARAM,
            "post": {
                "summary": "Set the number of instances behind the NF's one virtual port (scale out/in); 409 when "
                "no location can take them or OneSwitch cannot spread a port; 500/502: the previous set serves",
                "requestBody": _body(_ref("Scale")),
                "responses": {
                    "200": _resp("resized (or already that size)", _ref("Scaled")),
                    **_errors(400, 401, 404, 409, 500, 502),
                },
            },
        },
        "/v1/ports": {
            "get": {
                "summary": "Virtual ports",
                "responses": {
                    "200": _resp("ports", {"type": "array", "items": _ref("Port")}),
                    **_errors(401),
                },
            }
        },
        "/v1/chains": {
            "get": {
                "summary": "Serial NF chains with their predicted per-packet latency under the current placement",
                "responses": {
                    "200": _resp("chains", {"type": "array", "items": _ref("Chain")}),
                    **_errors(401),
                },
            }
        },
        "/v1/placement": {
            "get": {
                "summary": "Current locations, predicted vs measured load and PCIe use, last solve, history",
                "responses": {"200": _resp("placement", _ref("Placement")), **_errors(401)},
            }
        },
        "/v1/placement/run": {
            "post": {
                "summary": "Re-place now (hysteresis applies; force bypasses the dampening window)",
                "requestBody": _body(_ref("Run"), required=False),
                "responses": {"200": _resp("decision", _ref("Decision")), **_errors(400, 401)},
            }
        },
        "/v1/tables": {
            "get": {
                "summary": "OneSwitch's virtual tables: where each runs and, on the host, why (switching offload)",
                "responses": {
                    "200": _resp("tables", {"type": "array", "items": _ref("Table")}),
                    **_errors(401, 409, 502),
                },
            }
        },
        "/v1/tables/place": {
            "post": {
                "summary": "Place the tables now (NFs stay where they run) and move them through OneSwitch",
                "requestBody": _body(_ref("Run"), required=False),
                "responses": {"200": _resp("moves", {"type": "object"}), **_errors(400, 401, 409, 502)},
            }
        },
        "/v1/tables/{id}": {
            "put": {
                "summary": "Pin a table to the host or an sNIC (null: the solver's again); it moves there now",
                "parameters": [
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "description": "the table number",
                        "schema": {"type": "integer", "minimum": 0, "maximum": 253},
                    }
                ],
                "requestBody": _body(_ref("TablePin")),
                "responses": {"200": _resp("pinned", {"type": "object"}), **_errors(400, 401, 404, 409, 502)},
            }
        },
        "/v1/host": {
            "get": {
                "summary": "The host's shape for the web view: locations, sNICs (capacity, PCIe budget), VMs",
                "responses": {"200": _resp("host", _ref("Host")), **_errors(401)},
            }
        },
        "/v1/events": {
            "get": {
                "summary": "What the agent recorded (placement runs, moves, failovers, restarts, ...), oldest first",
                "parameters": [
                    {
                        "name": "since",
                        "in": "query",
                        "required": False,
                        "description": "only events with `t` (agent clock, seconds) after this",
                        "schema": {"type": "number"},
                    }
                ],
                "responses": {"200": _resp("events", _ref("Events")), **_errors(400, 401)},
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "UNO NF agent", "version": "1"},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
