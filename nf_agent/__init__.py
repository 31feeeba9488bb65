"""The NF agent: the host's management plane.

Pure modules first: `validation` (REST bodies -> requests), `store` (persisted state), `graph` (placement
instance from state + traffic), `monitor` (counters -> rates), `decide` (re-placement decision),
`background` (PCIe traffic through no NF); then the agent itself: `context` (what its jobs share and the
interfaces of the NF runtime and port mapper), `placement_model`, the jobs `inventory`, `moves`,
`supervisor`, `replacement`, `reconcile`, `views`, and the facade `service.Agent`; the REST edge `api`
(+ `openapi`, `metrics`, `logs`) and `client` (a minimal REST client of the agent).
"""
