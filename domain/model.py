"""The domain: VMs, NFs and their instances, and where they run (plain data, no I/O).

A location is "host" or an sNIC id "snicK". An NF is what the orchestrator asked for (type, config, its one
virtual port, its traffic expectation); its instances are the processes that serve that port, each with a
physical port on a switch that is never shown northbound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HOST = "host"
NF_TYPES = ("firewall", "nat", "monitor", "lb", "ips", "l7fw", "ipsec")


@dataclass
class Vm:
    """A tenant VM bound to one of the host's VM slots."""

    id: str
    slot: int
    vport: int
    tenant: str = "default"


@dataclass
class Instance:
    """One running process of an NF: where it runs and its physical port (never shown northbound)."""

    id: str
    location: str
    switch: str  # "host" | "snicK" (the physical switch its port is on)
    ofport: int
    netns: str
    inside_if: str
    port_if: str
    pid: int | None = None
    relay_pids: list[int] = field(default_factory=list)
    restarts: int = 0
    state: str = "starting"  # starting | running | failed
    binary: str | None = None  # the nf binary it runs (None: its runtime's default)


@dataclass
class Nf:
    """A network function as the orchestrator asked for it, plus where it runs now."""

    id: str
    type: str
    config: dict
    vport: int
    expected_gbps: float
    src: str | None  # placement-graph neighbours of the chain: traffic src -> nf -> dst
    dst: str | None
    pin: str | None = None
    prefer: str | None = None
    location: str | None = None
    instances: list[Instance] = field(default_factory=list)
    created: float = 0.0
    tenant: str = "default"  # its state is the tenant's (keys `tn:<tenant>:...`, the tenant's ACL user)
    store_wait: str | None = None  # N[:MS]: replicas acknowledging each batch's writes (`--store-wait`)
    latency_us: float | None = None  # SLO of the chain through this NF, first to last vertex (placement)
    autoscale: dict | None = None  # {"min", "max", "target_util"} (nf_agent.autoscale), None: fixed count
    balance: bool = (
        True  # scaled out: the agent weighs its instances' buckets by their load (nf_agent.balance)
    )
    # Live update (nf_agent/update.py): the nf binary new instances run (None: the runtime's default), its
    # version, the one before the last update (a rollback's target), and the state record layouts written by
    # every version that ran this NF (its records may still be in the tier).
    binary: str | None = None
    version: str | None = None
    previous_version: str | None = None
    state_layouts: list[int] = field(default_factory=list)
    # Layouts no running version writes any more: {layout: [since, record lifetime s]} (nf_agent.compat); they
    # leave `state_layouts` once their last record must have expired, so they stop blocking updates.
    layouts_retired: dict[str, list[float]] = field(default_factory=dict)

    def public(self) -> dict:
        """The northbound view: no physical ports, switches or PIDs."""
        return {
            "id": self.id,
            "type": self.type,
            "vport": self.vport,
            "location": self.location,
            "pin": self.pin,
            "hints": {"prefer": self.prefer} if self.prefer else {},
            "expected": {"gbps": self.expected_gbps, "src": self.src, "dst": self.dst}
            | ({"latency_us": self.latency_us} if self.latency_us is not None else {}),
            "config": self.config,
            "tenant": self.tenant,
            "durability": {"wait": self.store_wait} if self.store_wait else {},
            "autoscale": self.autoscale,
            "balance": self.balance,
            "version": self.version,
            "previous_version": self.previous_version,
            "instance_count": len(self.instances),
            "instances": [
                {"id": i.id, "location": i.location, "state": i.state, "restarts": i.restarts}
                for i in self.instances
            ],
        }
