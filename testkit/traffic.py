"""Real traffic helpers for datapath tests: ping, iperf3, HTTP and packet capture inside namespaces."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from host_datapath.sysutil import wait_for


def ping(ns: str, ip: str, count: int = 3) -> bool:
    cmd = ["ip", "netns", "exec", ns, "ping", "-c", str(count), "-i", "0.2", "-W", "1", ip]
    return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0


def iperf3_tcp(server_ns: str, server_ip: str, client_ns: str, seconds: float = 2.0) -> float:
    """TCP throughput in bit/s as the receiver counted it."""
    port = "5299"
    server = subprocess.Popen(
        ["ip", "netns", "exec", server_ns, "iperf3", "-s", "-1", "-p", port, "-B", server_ip],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(50):  # wait for the listener (a condition, bounded)
            ss = subprocess.run(
                ["ip", "netns", "exec", server_ns, "ss", "-ltn"], capture_output=True, text=True
            )
            if f":{port}" in ss.stdout:
                break
            time.sleep(0.1)
        out = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                client_ns,
                "iperf3",
                "-c",
                server_ip,
                "-p",
                port,
                "-t",
                str(seconds),
                "-J",
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
        )
        assert out.returncode == 0, out.stderr or out.stdout[-500:]
        return float(json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"])
    finally:
        server.kill()
        server.wait()


class Capture:
    """tcpdump -e on one interface in a namespace; `lines()` stops it and returns what it printed."""

    def __init__(self, ns: str, ifname: str, bpf: str = ""):
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "tcpdump", "-l", "-nn", "-e", "-i", ifname, *bpf.split()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # tcpdump prints "listening on" to stderr once the socket is open (after a line about verbosity).
        seen = [self.proc.stderr.readline() for _ in range(2)]
        assert any("listening" in line for line in seen), seen

    def lines(self) -> list[str]:
        time.sleep(0.3)  # let the last packets reach the capture buffer
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        return [line for line in out.splitlines() if line.strip()]


def serve_http(ns: str, ip: str, root: Path, port: int = 8000, log: Path | None = None) -> subprocess.Popen:
    """`python -m http.server` serving `root` on ip:port in namespace `ns` (its own session); returns once it
    listens. The caller kills it."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    try:
        p = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", str(port), "--bind", ip,
             "--directory", str(root)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
    finally:
        if log:
            out.close()
    want = f":{port:04X}"

    def listening() -> bool:
        if p.poll() is not None:
            raise RuntimeError(f"http.server in {ns} exited {p.returncode}")
        rows = Path(f"/proc/{p.pid}/net/tcp").read_text().splitlines()[1:]
        return any(want in row.split()[1] and row.split()[3] == "0A" for row in rows)

    try:
        wait_for(listening, 20, f"http.server in {ns}")
    except BaseException:
        p.kill()
        p.wait()
        raise
    return p


def http_get(ns: str, url: str, timeout: float = 5.0) -> bytes:
    """GET `url` from namespace `ns` (a child Python process there); RuntimeError if it fails."""
    code = (
        "import sys,urllib.request;"
        f"sys.stdout.buffer.write(urllib.request.urlopen({url!r}, timeout={timeout}).read())"
    )
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, timeout=timeout + 20
    )
    if out.returncode != 0:
        raise RuntimeError(f"GET {url} from {ns} failed: {out.stderr.decode()[-400:]}")
    return out.stdout
