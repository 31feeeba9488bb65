"""Tenants' credentials on a state tier with access control: each tenant's ACL user is made on every node
of the tier the first time one of its NFs starts (and again after the agent restarts: idempotent), its
password derived from the admin's (state_tier.acl.tenant_password: the same on every host of the tier)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from domain.errors import StartError
from state_tier.access import Credentials, TierError, Topology
from state_tier.acl import ensure_user, tenant_password, tenant_user


class TenantUsers:
    def __init__(self, topology: Callable[[], Topology | None], admin: Credentials):
        """`topology`: the tier's nodes now; `admin`: credentials that may manage ACL users."""
        self.topology = topology
        self.admin = admin
        self._made: set[str] = set()
        self._lock = threading.Lock()

    def credentials(self, tenant: str) -> tuple[str, str]:
        """(user, password) of `tenant`'s ACL user, made on the tier first if this agent has not yet."""
        with self._lock:
            password = tenant_password(self.admin, tenant)
            if tenant not in self._made:
                self.apply(tenant, password)
                self._made.add(tenant)
            return tenant_user(tenant), password

    def apply(self, tenant: str, password: str) -> list[str]:
        topo = self.topology()
        if topo is None:
            raise StartError(f"tenant {tenant}: no node of the state tier answers")
        try:
            return ensure_user(topo, self.admin, tenant, password)
        except TierError as exc:
            raise StartError(str(exc)) from None

    def refresh(self) -> None:
        """Make every known tenant's user again on every node (a node that restarted or joined lacks it)."""
        with self._lock:
            for tenant in sorted(self._made):
                self.apply(tenant, tenant_password(self.admin, tenant))
