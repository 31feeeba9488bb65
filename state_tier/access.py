"""Admin access to the tier: credentials, probing seed nodes (what `uno up` checks before it starts anything),
clients to one node or to the whole tier, the topology as the tier reports it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.cluster import ClusterNode, RedisCluster

from domain.errors import CliError
from state_tier.topology import Node, parse_cluster_nodes, split_address


class TierError(Exception):
    """The tier refused or did not answer; the message names the config key at fault where one is."""


@dataclass(frozen=True)
class Credentials:
    """The admin user the host's agent and tools use (None user: `default`)."""

    user: str | None = None
    password: str | None = None

    def kwargs(self) -> dict:
        return {"username": self.user, "password": self.password}


def read_password(path: str | Path, key: str) -> str:
    """The first line of a password file; a missing, unreadable or empty file is a CliError naming `key`."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CliError(f"config: {key}: cannot read {path}: {exc.strerror}") from None
    pw = text.splitlines()[0].strip() if text.strip() else ""
    if not pw:
        raise CliError(f"config: {key}: {path} is empty")
    return pw


@dataclass(frozen=True)
class Topology:
    """`kind`: cluster | single; `nodes`: every server with its role."""

    kind: str
    nodes: tuple[Node, ...]

    @property
    def masters(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "master" and n.slots > 0 or self.kind == "single"]

    def url(self) -> str:
        """The NFs' `--store`: `redis-cluster://` with every master as a seed, or `redis://` of the one server."""
        if self.kind == "single":
            return f"redis://{self.nodes[0].address}"
        return "redis-cluster://" + ",".join(n.address for n in self.masters)

    def public(self) -> list[dict]:
        return [n.public() for n in self.nodes]


def node_client(address: str, creds: Credentials, timeout: float = 2.0) -> redis.Redis:
    host, port = split_address(address)
    return redis.Redis(
        host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout, **creds.kwargs()
    )


def topology_of(client: redis.Redis, address: str) -> Topology:
    """The tier as the server behind `client` (at `address`) sees it."""
    if int(client.info("cluster").get("cluster_enabled", 0)):
        text = client.execute_command("CLUSTER", "NODES")
        return Topology(
            "cluster", tuple(parse_cluster_nodes(text.decode() if isinstance(text, bytes) else text))
        )
    rep = client.info("replication")
    role = "master" if rep.get("role") == "master" else "replica"
    return Topology("single", (Node("-", address, role),))


def probe(seeds: list[str], creds: Credentials, timeout: float = 2.0) -> Topology:
    """Check an operator's tier before anything starts: a seed answers, the credentials hold and may manage
    ACL users, the tier has a master (a cluster: reports `cluster_state:ok`). Raises CliError naming the key."""
    errors = []
    for seed in seeds:
        c = node_client(seed, creds, timeout)
        try:
            topo = topology_of(c, seed)
            c.execute_command("ACL", "WHOAMI")
            c.execute_command("ACL", "USERS")  # needs the ACL rights the agent uses for tenants' users
            state = c.info("cluster").get("cluster_enabled") and c.execute_command("CLUSTER", "INFO")
        except redis.AuthenticationError as exc:
            if creds.password is None:
                raise CliError(f"config: redis.password_file: {seed} requires a password ({exc})") from None
            key = "redis.user" if creds.user else "redis.password_file"
            raise CliError(f"config: {key}: {seed} refused the credentials: {exc}") from None
        except redis.exceptions.NoPermissionError as exc:
            raise CliError(
                f"config: redis.user: {creds.user or 'default'} may not manage ACL users on {seed}: {exc}"
            ) from None
        except redis.ResponseError as exc:
            if "NOAUTH" in str(exc) or "Authentication required" in str(exc):
                raise CliError(f"config: redis.password_file: {seed} requires a password") from None
            errors.append(f"{seed}: {exc}")
            continue
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            errors.append(f"{seed}: {exc}")
            continue
        finally:
            c.close()
        if state:
            text = state.decode() if isinstance(state, bytes) else str(state)
            if "cluster_state:ok" not in text:
                raise CliError(f"config: redis.nodes: the cluster at {seed} reports cluster_state not ok")
        if not topo.masters or (topo.kind == "single" and topo.nodes[0].role != "master"):
            raise CliError(f"config: redis.nodes: {seed} is a replica and the list names no master")
        return topo
    raise CliError("config: redis.nodes: no seed node answers (" + "; ".join(errors) + ")")


def live_topology(seeds: list[str], creds: Credentials, timeout: float = 1.0) -> Topology | None:
    """The tier's nodes as the first answering seed reports them; None when none answers."""
    for seed in seeds:
        c = node_client(seed, creds, timeout)
        try:
            return topology_of(c, seed)
        except (redis.RedisError, OSError):
            continue
        finally:
            c.close()
    return None


def tier_client(topo: Topology, creds: Credentials, timeout: float = 2.0) -> redis.Redis | RedisCluster:
    """A client of the whole tier: redis-py's RedisCluster (slot routing, MOVED/ASK) or a plain Redis."""
    if topo.kind == "single":
        return node_client(topo.nodes[0].address, creds, timeout)
    seeds = [ClusterNode(*split_address(n.address)) for n in topo.masters]
    return RedisCluster(
        startup_nodes=seeds, socket_timeout=timeout, socket_connect_timeout=timeout, **creds.kwargs()
    )


def ping(topo: Topology, creds: Credentials, timeout: float = 0.5) -> bool:
    """Every master answers PING (a cluster with a master down serves part of its slots: not healthy)."""
    for n in topo.masters:
        c = node_client(n.address, creds, timeout)
        try:
            if not c.ping():
                return False
        except (redis.RedisError, OSError):
            return False
        finally:
            with contextlib.suppress(Exception):
                c.close()
    return True
