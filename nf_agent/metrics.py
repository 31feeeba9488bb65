"""Prometheus metrics of the agent, read from its state at scrape time (`/metrics`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class AgentCollector:
    def __init__(self, agent):
        self.agent = agent

    def collect(self):
        a = self.agent
        view = a.placement_view()
        c = a.counters
        for name, help_, value in (
            ("uno_agent_solves", "Placement solves run", c.solves),
            ("uno_agent_migrations", "NF migrations completed", c.migrations),
            (
                "uno_agent_migration_failures",
                "NF migrations that failed (NF left where it was)",
                c.migration_failures,
            ),
            ("uno_agent_nf_restarts", "NF process restarts by the supervisor", c.restarts),
            ("uno_agent_nf_failovers", "NF instances replaced by failover (vport remapped)", c.failovers),
            ("uno_agent_provisions", "NFs provisioned", c.provisions),
            ("uno_agent_nf_scales", "NF resizes (scale out/in) completed", c.scales),
            (
                "uno_agent_nf_scale_failures",
                "NF resizes that failed (previous set serving)",
                c.scale_failures,
            ),
        ):
            m = CounterMetricFamily(name, help_)
            m.add_metric([], value)
            yield m
        inst = GaugeMetricFamily("uno_agent_nf_instances", "Instances behind each NF's vport", labels=["nf"])
        with a.lock:
            for nf in a.state.nfs.values():
                inst.add_metric([nf.id], len(nf.instances))
        yield inst
        nfs = GaugeMetricFamily("uno_agent_nfs", "NFs per location", labels=["location"])
        counts: dict[str, int] = {loc: 0 for loc in a.locations}
        for loc in view["locations"].values():
            counts[loc] = counts.get(loc, 0) + 1
        for loc, n in sorted(counts.items()):
            nfs.add_metric([loc], n)
        yield nfs
        pred = view["predicted"] or {"host_cores": 0.0, "snic_load": {}, "pcie_gbps": {}}
        g = GaugeMetricFamily(
            "uno_agent_predicted_host_cores", "Host CPU cores the placement model predicts for NFs"
        )
        g.add_metric([], pred["host_cores"])
        yield g
        if "all_host_cores" in pred:
            g = GaugeMetricFamily(
                "uno_agent_predicted_all_host_cores",
                "Host CPU cores the model predicts for the same NFs all on the host (what the offload saves)",
            )
            g.add_metric([], pred["all_host_cores"])
            yield g
        g = GaugeMetricFamily(
            "uno_agent_predicted_snic_load", "Predicted sNIC load (placement units)", labels=["snic"]
        )
        for s, v in sorted(pred["snic_load"].items()):
            g.add_metric([s], v)
        yield g
        yield _per_link(
            "uno_agent_predicted_pcie_gbps",
            "Predicted PCIe Gbit/s (NF crossings + background)",
            pred["pcie_gbps"],
        )
        yield _per_link(
            "uno_agent_pcie_background_gbps",
            "Measured PCIe Gbit/s the model does not explain (traffic through no NF)",
            pred.get("background_gbps", {}),
        )
        m = view["measured"]
        if m:
            g = GaugeMetricFamily(
                "uno_agent_measured_cpu_cores", "CPU cores used by NF processes", labels=["location"]
            )
            for loc, v in m["cpu_cores"].items():
                g.add_metric([loc], v)
            yield g
            yield _per_link("uno_agent_measured_pcie_gbps", "Measured PCIe Gbit/s", m["pcie_gbps"])
            g = GaugeMetricFamily("uno_agent_nf_load_gbps", "Measured Gbit/s through each NF", labels=["nf"])
            for nf, v in m["nf_load_gbps"].items():
                g.add_metric([nf], v)
            yield g
        health = a.health()
        h = GaugeMetricFamily(
            "uno_agent_nf_healthy",
            "1 when every instance of the NF answers /health and its state tier answers",
            labels=["nf"],
        )
        for nf, st in health["nfs"].items():
            h.add_metric([nf], 1 if st == "healthy" else 0)
        yield h
        if health["store"] != "local":
            g = GaugeMetricFamily("uno_agent_store_up", "1 when the state tier (Redis) answers a PING")
            g.add_metric([], 1 if health["store"] == "ok" else 0)
            yield g
        if c.last_provision_ms is not None:
            g = GaugeMetricFamily("uno_agent_last_provision_ms", "Time of the last POST /v1/nfs (ms)")
            g.add_metric([], c.last_provision_ms)
            yield g


class Metrics:
    def __init__(self, agent):
        self.registry = CollectorRegistry()
        self.registry.register(AgentCollector(agent))
        self.requests = Counter(
            "uno_agent_http_requests", "REST requests", ["method", "route", "status"], registry=self.registry
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _per_link(name: str, doc: str, values: dict[str, dict[str, float]]) -> GaugeMetricFamily:
    """A gauge per sNIC link and direction (up, down)."""
    g = GaugeMetricFamily(name, doc, labels=["snic", "direction"])
    for s, d in sorted(values.items()):
        for direction, v in sorted(d.items()):
            g.add_metric([s, direction], v)
    return g
