"""Mapping NF virtual ports in OneSwitch: one small interface, the OneSwitch REST client behind it.

The agent calls only `PortMapper`; `OneSwitchPortMapper` is the real one. (Unit tests of the agent's
REST/rollback logic use a fake; lifecycle tests use OneSwitch.)
"""

from __future__ import annotations

from typing import Protocol

from host_datapath.oneswitch_client import OneSwitchClient, OneSwitchError


class PortMapError(Exception):
    """OneSwitch refused or could not be reached."""


class ScaleUnsupported(PortMapError):
    """This OneSwitch cannot spread one virtual port over several physical ports (no instances endpoint)."""


class PrepareUnsupported(PortMapError):
    """This OneSwitch cannot install a remap's target ahead (no prepare endpoint): remap directly."""


class PortMapper(Protocol):
    def map(self, vport: int, switch: str, port: int, name: str) -> None:
        """Map virtual port `vport` to physical port `port` of `switch` ("host", "snic0", ...)."""

    def remap(self, vport: int, switch: str, port: int, drain_ms: int | None = None) -> float:
        """Move `vport` to a new physical port make-before-break; returns the remap time in ms. The old port
        stays ingress-only (draining) for `drain_ms` (None: OneSwitch's default)."""

    def unmap(self, vport: int) -> None:
        """Remove the mapping (no error if it is not mapped)."""

    def mapped(self) -> dict[int, tuple[str, int]]:
        """The current map: vport -> (switch, port) (the first instance when the vport has several)."""

    def set_instances(
        self, vport: int, instances: list[tuple[str, int]], drain_ms: int | None = None
    ) -> float:
        """Spread `vport` over several physical ports (OneSwitch: an OVS select group, per-flow hash),
        make-before-break; the vport must be mapped. Returns OneSwitch's time in ms. ScaleUnsupported when
        OneSwitch has no such endpoint. A removed instance's port drains for `drain_ms` as in `remap`."""

    def instances(self) -> dict[int, list[tuple[str, int]]]:
        """vport -> all (switch, port)s it spreads over (one entry for a plainly mapped vport)."""


class OneSwitchPortMapper:
    def __init__(self, client: OneSwitchClient):
        self.client = client

    def map(self, vport: int, switch: str, port: int, name: str) -> None:
        try:
            self.client.map_port(vport, switch, port, name=name)
        except OneSwitchError as exc:
            raise PortMapError(f"map vport {vport} -> {switch}:{port}: {exc}") from None

    def remap(self, vport: int, switch: str, port: int, drain_ms: int | None = None) -> float:
        try:
            return self.client.remap(vport, switch, port, drain_ms=drain_ms).duration_ms
        except OneSwitchError as exc:
            raise PortMapError(f"remap vport {vport} -> {switch}:{port}: {exc}") from None

    def prepare(self, vport: int, switch: str, port: int, ms: int | None = None) -> float:
        """Install `vport`'s rules for the coming remap to (switch, port) ahead (an ingress-only port for `ms`);
        returns OneSwitch's time in ms. PrepareUnsupported when OneSwitch has no such endpoint."""
        try:
            return self.client.prepare(vport, switch, port, ms=ms).duration_ms
        except OneSwitchError as exc:
            if exc.status in (404, 405) and exc.field is None:  # no such path/method: an older OneSwitch
                raise PrepareUnsupported(f"OneSwitch cannot prepare vport {vport}: {exc}") from None
            raise PortMapError(f"prepare vport {vport} -> {switch}:{port}: {exc}") from None

    def unmap(self, vport: int) -> None:
        try:
            self.client.unmap_port(vport)
        except OneSwitchError as exc:
            if exc.status != 404:
                raise PortMapError(f"unmap vport {vport}: {exc}") from None

    def mapped(self) -> dict[int, tuple[str, int]]:
        try:
            return {p.vport: (p.switch, p.port) for p in self.client.ports()}
        except OneSwitchError as exc:
            raise PortMapError(f"list ports: {exc}") from None

    def set_instances(
        self, vport: int, instances: list[tuple[str, int]], drain_ms: int | None = None
    ) -> float:
        try:
            return self.client.set_instances(vport, list(instances), drain_ms=drain_ms).duration_ms
        except OneSwitchError as exc:
            if exc.status in (404, 405) and exc.field is None:  # no such path/method: an older OneSwitch
                raise ScaleUnsupported(f"OneSwitch cannot spread vport {vport}: {exc}") from None
            raise PortMapError(f"set instances of vport {vport}: {exc}") from None

    def instances(self) -> dict[int, list[tuple[str, int]]]:
        try:
            return {p.vport: list(p.instances) for p in self.client.ports()}
        except OneSwitchError as exc:
            raise PortMapError(f"list ports: {exc}") from None
