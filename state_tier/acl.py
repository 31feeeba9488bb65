"""Per-tenant Redis ACL users: one user per tenant, limited to the tenant's keys, created on every node of
the tier (ACL users are per server: a cluster's masters and replicas each need it)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac

import redis

from state_tier.access import Credentials, TierError, Topology, node_client
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


def tenant_password(admin: Credentials, tenant: str) -> str:
    """The tenant's password, derived from the admin's: every host's agent sharing one tier (with the same
    admin credentials) hands the tenant's NFs the same password without exchanging it, and re-making the
    user on a restarted node changes nothing for the NFs connected elsewhere."""
    key = (admin.password or "").encode()
    return hmac.new(key, f"uno-tenant:{tenant}".encode(), hashlib.sha256).hexdigest()[:40]


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
