"""Mapping NF virtual ports in OneSwitch: the agent's `PortMapper` (nf_agent/context.py) over OneSwitch's
REST client, its failures turned into domain errors (PortMapError and the two "this OneSwitch cannot"
kinds)."""

from __future__ import annotations

from collections.abc import Callable

from domain.errors import PortMapError, PrepareUnsupported, ScaleUnsupported
from host_datapath.oneswitch_client import OneSwitchClient, OneSwitchError


class OneSwitchPortMapper:
    """`nf_name`: how an NF's id becomes the port name controllers see (neutral: `oneswitch.port_names.nf`;
    OpenFlow port names hold 15 bytes)."""

    def __init__(self, client: OneSwitchClient, nf_name: Callable[[str], str] = lambda i: f"nf-{i}"[:15]):
        self.client = client
        self.nf_name = nf_name

    def map(self, vport: int, switch: str, port: int, name: str) -> None:
        try:
            self.client.map_port(vport, switch, port, name=self.nf_name(name))
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
        self,
        vport: int,
        instances: list[tuple[str, int]],
        drain_ms: int | None = None,
        weights: list[int] | None = None,
    ) -> float:
        try:
            return self.client.set_instances(
                vport, list(instances), drain_ms=drain_ms, weights=weights
            ).duration_ms
        except OneSwitchError as exc:
            if exc.status in (404, 405) and exc.field is None:  # no such path/method: an older OneSwitch
                raise ScaleUnsupported(f"OneSwitch cannot spread vport {vport}: {exc}") from None
            raise PortMapError(f"set instances of vport {vport}: {exc}") from None

    def instances(self) -> dict[int, list[tuple[str, int]]]:
        try:
            return {p.vport: list(p.instances) for p in self.client.ports()}
        except OneSwitchError as exc:
            raise PortMapError(f"list ports: {exc}") from None

    def weights(self) -> dict[int, list[int]]:
        """vport -> its instances' select bucket weights (empty from an OneSwitch that has none)."""
        try:
            return {p.vport: list(p.weights) for p in self.client.ports()}
        except OneSwitchError as exc:
            raise PortMapError(f"list ports: {exc}") from None

    def connected(self, switch: str) -> bool:
        try:
            return self.client.health().switches.get(switch) == "connected"
        except OneSwitchError:
            return False
