"""The demo's LB path: a virtual IP served by `nf lb` in front of a small HTTP server in each VM.

Each backend answers every GET with one line "<backend name> <client ip>:<client port>", over HTTP/1.1
keep-alive, so that several requests on one connection show that the connection stays on one backend, and the
client port tells connections apart. The helpers below are pure (parse and tally the answers)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from state_tier.keys import DEFAULT_TENANT, nf_key

VIP = "10.77.0.100"  # in the VMs' /16, so the outside reaches it on-link (with a static neighbour entry)
VIP_PORT = 80
BACKEND_PORT = 8000
VIP_MAC = "02:75:6e:0b:00:00"  # the outside's neighbour entry for the VIP (steering matches the address)

# argv: name, address, port. Quiet; one thread per connection.
BACKEND_SERVER = r"""
import http.server, sys
name, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = f"{name} {self.client_address[0]}:{self.client_address[1]}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((ip, port), H).serve_forever()
"""


def lb_config(backends: Iterable[str]) -> dict:
    """The `nf lb` config for the demo's VIP and the backends' addresses."""
    return {
        "vip": VIP,
        "port": VIP_PORT,
        "proto": "tcp",
        "backends": [f"{ip}:{BACKEND_PORT}" for ip in backends],
    }


def parse_answers(text: str, names: Iterable[str]) -> list[tuple[str, str]]:
    """(backend, client ip:port) per answer line; a line that is not a known backend's answer is dropped."""
    known = set(names)
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in known and ":" in parts[1]:
            out.append((parts[0], parts[1]))
    return out


def spread(answers: Iterable[tuple[str, str]], names: Iterable[str]) -> dict[str, int]:
    """Connections per backend, every backend listed (0 when none)."""
    counts = Counter(name for name, _ in answers)
    return {n: counts.get(n, 0) for n in names}


def format_spread(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {c}" for n, c in counts.items())


def pool_keys(nf_id: str, addrs: Iterable[str], tenant: str = DEFAULT_TENANT) -> tuple[str, dict[str, str]]:
    """The LB's pool key and its active-connection counter keys by backend address (nfs/README.md, `lb`)."""
    return nf_key(tenant, nf_id, "backends"), {a: nf_key(tenant, nf_id, f"lb-conns:{a}") for a in addrs}


def format_pool(pool: bytes | None, active: dict[str, bytes | None], names: dict[str, str]) -> str:
    """The pool as one line, e.g. `web 10.77.0.10:8000 up, 1 active; ...` (backend names by address)."""
    if pool is None:
        return "pool not seeded yet"
    states = {}
    for line in pool.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    out = []
    for addr, name in names.items():
        raw = active.get(addr)
        n = raw.decode(errors="replace") if raw is not None else "0"
        out.append(f"{name} {addr} {states.get(addr, 'not in pool')}, {n} active")
    return "; ".join(out)
