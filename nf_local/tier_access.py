"""How one NF instance reaches the state tier: its `--store` URL and, for a tier with access control, its
tenant, ACL user and password (handed over in a 0600 file, never on the command line), and the replica
acknowledgement (`--store-wait`) its writes need."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from host_datapath.sysutil import write_private

WAIT_RE = re.compile(r"^([1-9]|1[0-6])(:([1-9]\d{0,4}))?$")


@dataclass(frozen=True)
class TierAccess:
    """`url`: `local`, `unix:///PATH`, `redis://HOST:PORT[/DB]` or `redis-cluster://H:P,H:P,...`.
    `tenant`: `--tenant` (None: the NF's default). `user`/`password`: the tenant's ACL user.
    `wait`: `N[:MS]`, replicas that acknowledge each batch's writes before its packets leave."""

    url: str
    tenant: str | None = None
    user: str | None = None
    password: str | None = None
    wait: str | None = None

    def args(self, password_file: Path) -> list[str]:
        """The NF's command-line options; writes the password (if any) to `password_file`, mode 0600."""
        out = ["--store", self.url]
        if self.tenant is not None:
            out += ["--tenant", self.tenant]
        if self.user is not None:
            out += ["--store-user", self.user]
        if self.password is not None:
            write_private(password_file, self.password)
            out += ["--store-password-file", str(password_file)]
        if self.wait is not None:
            out += ["--store-wait", self.wait]
        return out

    def public(self) -> dict:
        """What may be shown or logged: everything but the password."""
        return {"url": self.url, "tenant": self.tenant, "user": self.user, "wait": self.wait}


def as_access(store: str | TierAccess) -> TierAccess:
    return store if isinstance(store, TierAccess) else TierAccess(store)
