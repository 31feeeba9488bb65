"""A client of an sNIC agent's REST API (snic_agent/api.py, docs/snic.md): its instances, the machine, its
ports, its heartbeat stream. Every non-2xx answer is raised as `SnicAgentError` with the HTTP status and the
agent's JSON error; no answer at all is status 0."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

from host_datapath.rest_client import RestClient, RestError


class SnicAgentError(RestError):
    what = "sNIC agent"


class SnicAgentClient(RestClient):
    """`base`: the sNIC agent's `http://ADDR:PORT` on the management network; every call carries `token`."""

    what = "sNIC agent"
    error = SnicAgentError

    def __init__(self, snic: str, base: str, token: str, timeout: float = 60.0):
        super().__init__(base, token, timeout)
        self.snic = snic

    def _get(self, path: str) -> Any:
        return self.request("GET", path)[1]

    def health(self) -> dict:
        return self._get("/v1/health")

    def info(self) -> dict:
        return self._get("/v1/info")

    def ports(self) -> list[dict]:
        return self._get("/v1/ports")

    def port_counters(self) -> dict:
        """`{"t", "counters"}`: one dump of its bridge's port counters and when it was read (its own clock)."""
        return self._get("/v1/port-counters")

    def instances(self, health: bool = False, counters: bool = False) -> list[dict]:
        return self._get(f"/v1/instances?health={int(health)}&counters={int(counters)}")

    def instance(self, inst_id: str, counters: bool = False) -> dict:
        return self._get(f"/v1/instances/{inst_id}" + ("?counters=1" if counters else ""))

    def start(self, body: dict) -> dict:
        return self.request("POST", "/v1/instances", body)[1]

    def stop(self, inst_id: str) -> None:
        self.request("DELETE", f"/v1/instances/{inst_id}")

    def stop_processes(self, inst_id: str) -> dict:
        return self.request("POST", f"/v1/instances/{inst_id}/stop")[1]

    def start_processes(self, inst_id: str) -> dict:
        return self.request("POST", f"/v1/instances/{inst_id}/start")[1]

    def put_config(self, inst_id: str, config: dict) -> dict:
        """Give a running instance its whole new config in place (its NF's `PUT /config`, relayed)."""
        return self.request("PUT", f"/v1/instances/{inst_id}/config", config)[1]

    def nf_versions(self) -> list[dict]:
        return self._get("/v1/nf-versions")

    def nf_version(self, name: str) -> dict:
        return self._get(f"/v1/nf-versions/{name}")

    def put_nf_version(self, name: str, data: bytes, sha256: str) -> dict:
        """Ship an nf binary (live update); the agent keeps it once `sha256` matches and it runs there."""
        return self.request("PUT", f"/v1/nf-versions/{name}?sha256={sha256}", raw=data)[1]

    def nf(self, inst_id: str, method: str, call: str, query: str = "", raw: bytes | None = None) -> Any:
        path = f"/v1/instances/{inst_id}/nf/{call}" + (f"?{query}" if query else "")
        return self.request(method, path, raw=raw)[1]

    def nf_bytes(self, inst_id: str, call: str, query: str = "") -> bytes:
        """GET an NF call whose answer is not JSON (the serialised state)."""
        conn = self._connect(self.timeout)
        try:
            path = f"{self._prefix}/v1/instances/{inst_id}/nf/{call}" + (f"?{query}" if query else "")
            conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            resp = conn.getresponse()
            data = resp.read()
        except (http.client.HTTPException, OSError) as exc:
            raise self.error(0, f"cannot reach the sNIC agent at {self.base}: {exc}") from None
        finally:
            conn.close()
        if resp.status >= 400:
            raise self.error(resp.status, data[:200].decode(errors="replace"))
        return data

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def heartbeat(self, interval_ms: int, timeout_s: float) -> Iterator[dict]:
        """The agent's heartbeat stream on its own connection: one dict per beat ({"seq", "t", "boot_id",
        "exited"}); TimeoutError when no beat came for `timeout_s`, SnicAgentError when it cannot be had or
        the stream ends."""
        try:
            conn = self._connect(timeout_s)
            conn.request("GET", f"{self._prefix}/v1/heartbeat?interval_ms={interval_ms}",
                         headers={"Authorization": f"Bearer {self.token}"})  # fmt: skip
            resp = conn.getresponse()
        except (http.client.HTTPException, OSError) as exc:
            raise self.error(0, f"no heartbeat from {self.base}: {exc}") from None
        try:
            if resp.status != 200:
                raise self.error(resp.status, resp.read()[:200].decode(errors="replace"))
            while True:
                try:
                    line = resp.readline()
                except TimeoutError:
                    raise TimeoutError(
                        f"no heartbeat from {self.snic} for {timeout_s * 1000:.0f} ms"
                    ) from None
                except (http.client.HTTPException, OSError) as exc:
                    raise self.error(0, f"heartbeat from {self.base} broke: {exc}") from None
                if not line:
                    raise self.error(0, f"heartbeat from {self.base} ended")
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()
