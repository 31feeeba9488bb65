"""An operator's Redis or Redis Cluster (`redis.mode: external`), shared by several hosts: this host starts
and stops nothing of it; `uno up` checks it answers, with the credentials given (state_tier.access.probe)."""

from __future__ import annotations

from dataclasses import dataclass

from state_tier.access import Credentials, Topology, live_topology


@dataclass
class ExternalTier:
    seeds: tuple[str, ...]
    creds: Credentials
    key: str = "redis"

    def credentials(self) -> Credentials:
        return self.creds

    def up(self) -> None:
        """Nothing to start (checked before the host's bring-up began)."""

    def down(self) -> None:
        """Not this host's to stop."""

    def running(self) -> bool:
        return True  # an outage of the operator's tier is the agent's health check's to report, not `up`'s

    def topology(self) -> Topology | None:
        return live_topology(list(self.seeds), self.creds)

    def status(self) -> dict:
        topo = self.topology()
        return {
            "mode": "external",
            "url": topo.url() if topo else None,
            "seeds": list(self.seeds),
            "nodes": topo.public() if topo else [],
            "reachable": topo is not None,
            "running": True, "port": None, "unix_socket": None, "pid": None,
        }  # fmt: skip
