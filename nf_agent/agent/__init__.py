"""The NF agent: the host's management plane (REST API, NF lifecycle, monitoring, re-placement).

Modules, pure ones first: `model` (domain + validation), `store` (persisted state), `graph` (placement
instance from state + traffic), `monitor` (counters -> rates), `decide` (re-placement decision), then the I/O
edges: `portmap` (OneSwitch), `runtime` (NF processes on the emulated host), `service` (the agent), `api`
(Flask), `openapi`, `metrics`, `logs`, `endpoint` (where `uno status` finds the agent).
"""
