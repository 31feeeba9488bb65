"""One-way latency of real packets between two namespaces of an emulated host: `traffic gen` stamps each UDP
frame with the wall clock as it sends it, `traffic sink` reads the stamp as it receives it (one machine, one
clock), and reports the percentiles."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from nf_runtime.runtime import NF_BINARY
from testkit.procs import last_json

TRAFFIC = NF_BINARY.parent / "traffic"


@dataclass(frozen=True)
class End:
    """One end of a path: namespace, interface, IP and MAC of its frames."""

    ns: str
    iface: str
    ip: str
    mac: str


@dataclass(frozen=True)
class Via:
    """What an NF on the path needs of the frames: sent to `dst_ip`:`dst_port` instead of the far end's
    address (a load balancer's VIP), or read through an IPsec gateway's outbound SA (`esp_key`, `esp_salt`
    hex: the sink decrypts the ESP frames to read their stamps)."""

    dst_ip: str | None = None
    dst_port: int | None = None
    esp_key: str | None = None
    esp_salt: str | None = None


DIRECT = Via()  # the frames as addressed to the far end, in clear


def one_way(
    src: End, dst: End, run: int, packets: int, rate: float, size: int = 128, via: Via = DIRECT
) -> dict:
    """Send `packets` UDP frames src -> dst at `rate` per second; the sink's report: `received`,
    `latency_us` {p50, p90, p99, max}. Both processes are gone when it returns (also on failure)."""
    esp = ["--esp-key", via.esp_key, "--esp-salt", via.esp_salt or ""] if via.esp_key else []
    port = ["--dst-port", str(via.dst_port)] if via.dst_port else []
    sink = subprocess.Popen(
        ["ip", "netns", "exec", dst.ns, str(TRAFFIC), "sink", "--port", dst.iface, "--run", str(run),
         "--expect", str(packets), "--idle-ms", "2000", "--duration-ms", str(int(packets / rate * 1000) + 30_000),
         *esp],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        ready = sink.stdout.readline()
        if '"ready"' not in ready:
            raise RuntimeError(f"traffic sink did not start: {ready!r}")
        gen = subprocess.run(
            ["ip", "netns", "exec", src.ns, str(TRAFFIC), "gen", "--port", src.iface, "--udp", "--run", str(run),
             "--flows", "1", "--pkts", str(packets), "--rate", str(rate), "--size", str(size), "--src", src.ip,
             "--dst", via.dst_ip or dst.ip, *port, "--src-mac", src.mac, "--dst-mac", dst.mac],
            capture_output=True, text=True, timeout=packets / rate + 60,
        )  # fmt: skip
        if gen.returncode != 0:
            raise RuntimeError(f"traffic gen exited {gen.returncode}: {gen.stderr.strip()[-300:]}")
        out, err = sink.communicate(timeout=packets / rate + 60)
        if sink.returncode != 0 or "{" not in out:
            raise RuntimeError(f"traffic sink exited {sink.returncode}: {err.strip()[-300:]}")
        return last_json(out)
    finally:
        if sink.poll() is None:
            sink.kill()
        sink.wait()
