"""Per-tenant Redis ACL users: one user per tenant, limited to the tenant's keys, created on every node of
the tier (ACL users are per server: a cluster's masters and replicas each need it)."""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

import redis

from state_tier.access import Credentials, TierError, Topology, node_client
from state_tier.files import write_private
from state_tier.keys import tenant_pattern


def tenant_user(tenant: str) -> str:
    return f"tn-{tenant}"


def tenant_rules(tenant: str, password: str) -> list[str]:
    """ACL SETUSER rules: the tenant's keys only, no channels, every data command but the admin and
    dangerous ones (CONFIG, FLUSHALL, KEYS, DEBUG, ...); cluster clients still read the slot map."""
    return [
        "reset", "on", f">{password}", f"~{tenant_pattern(tenant)}", "resetchannels",
        "+@all", "-@admin", "-@dangerous",
        "+cluster|slots", "+cluster|shards", "+cluster|nodes", "+cluster|info", "+readonly", "+info",
    ]  # fmt: skip


def tenant_password(directory: Path, tenant: str) -> str:
    """The tenant's password, kept in `directory/<tenant>.pass` (0600) so the agent's restarts keep it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{tenant}.pass"
    if path.exists():
        return path.read_text().strip()
    pw = secrets.token_urlsafe(24)
    tmp = path.with_suffix(".tmp")
    write_private(tmp, pw)
    tmp.replace(path)
    return pw


def ensure_user(topo: Topology, admin: Credentials, tenant: str, password: str) -> list[str]:
    """Create or refresh the tenant's user on every reachable node; persist it where the node has an ACL
    file (a restarted node keeps it). Returns the nodes it could not reach (failed nodes of a cluster);
    raises TierError when no master took it."""
    missed = []
    rules = tenant_rules(tenant, password)
    for node in topo.nodes:
        c = node_client(node.address, admin)
        try:
            c.execute_command("ACL", "SETUSER", tenant_user(tenant), *rules)
            with contextlib.suppress(redis.ResponseError):  # no aclfile (an operator's server): in memory
                c.execute_command("ACL", "SAVE")
        except (redis.RedisError, OSError) as exc:
            if node.role == "master" and not node.failed:
                raise TierError(
                    f"tenant {tenant}: cannot create its ACL user on {node.address}: {exc}"
                ) from None
            missed.append(node.address)
        finally:
            c.close()
    return missed
