"""Shipping an `nf` binary to an sNIC for a live update: the sNIC is a separate machine, so a binary reaches
it only through its agent's API (`PUT /v1/nf-versions/NAME?sha256=`), once per content; an instance then
names it in its start request (`version`). The name is derived from the content (`sha256-` + digest prefix):
the same bytes are shipped once, different bytes can never take an existing name."""

from __future__ import annotations

import hashlib
import platform
import threading
from pathlib import Path

from domain.errors import StartError
from host_datapath.snic_agent_client import SnicAgentClient, SnicAgentError


class BinaryShipper:
    """The nf binaries one sNIC agent holds, shipped on first use. A binary built for the host's CPU runs on
    an sNIC of another architecture only as its sibling `nf-ARCH` (e.g. `nf-aarch64` beside `nf` in a
    versions directory); without one the update is refused, never started with the sNIC's own binary."""

    def __init__(self, client: SnicAgentClient):
        self.client = client
        self._names: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> name on the sNIC
        self._arch: str | None = None
        self._lock = threading.Lock()

    def _for_arch(self, binary: Path) -> Path:
        if self._arch is None:
            self._arch = str(self.client.info().get("arch") or platform.machine())
        if self._arch == platform.machine():
            return binary
        sibling = binary.with_name(f"nf-{self._arch}")
        if not sibling.is_file():
            raise StartError(
                f"{self.client.snic} runs {self._arch}, {binary} is built for {platform.machine()}: "
                f"put an {self._arch} build beside it as {sibling.name}"
            )
        return sibling

    def ship(self, binary: Path) -> str:
        """The name `binary` has on the sNIC, shipped first if the sNIC does not hold it; StartError why not."""
        with self._lock:
            try:
                path = self._for_arch(binary)
                st = path.stat()
                key = (str(path), st.st_size, st.st_mtime_ns)
                if key in self._names:
                    return self._names[key]
                data = path.read_bytes()  # read once: what is hashed is what is shipped
                digest = hashlib.sha256(data).hexdigest()
                name = f"sha256-{digest[:32]}"
                try:
                    have = self.client.nf_version(name)
                except SnicAgentError as exc:
                    if exc.status != 404:
                        raise
                    have = self.client.put_nf_version(name, data, digest)
                if have.get("sha256") != digest:
                    raise StartError(f"{self.client.snic} holds {name} as other bytes")
            except SnicAgentError as exc:
                raise StartError(f"shipping {binary} to {self.client.snic}: {exc}") from None
            except OSError as exc:
                raise StartError(f"cannot read {binary}: {exc}") from None
            self._names[key] = name
            return name
