"""Tenant-qualified NF keys, as the NFs write them (flowstore::keys): every key of a tenant's NF starts with
`tn:<tenant>:`, the pattern the tenant's ACL user is limited to."""

from __future__ import annotations

import re

TENANT_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
DEFAULT_TENANT = "default"


def tenant_prefix(tenant: str) -> str:
    """`tn:<tenant>:`, the start of every key of the tenant's NFs."""
    return f"tn:{tenant}:"


def tenant_pattern(tenant: str) -> str:
    """The ACL key pattern of the tenant's user."""
    return f"{tenant_prefix(tenant)}*"


_GLOB = re.compile(r"([*?\[\]\\])")


def nf_pattern(tenant: str, nf_id: str) -> str:
    """The SCAN pattern of every key of the tenant's NF `nf_id` (glob characters in the id escaped)."""
    escaped = _GLOB.sub(r"\\\1", nf_id)
    return f"{tenant_prefix(tenant)}nf:{escaped}:*"


def nf_key(tenant: str, nf_id: str, name: str) -> str:
    """An NF-wide key, e.g. `nf_key("default", "lb", "backends")` -> `tn:default:nf:lb:{backends}`."""
    return f"{tenant_prefix(tenant)}nf:{nf_id}:{{{name}}}"
