"""Host switches built at the driver level, plain (userspace netdev OVS) or OVS-DPDK, with namespaces plugged in
and switches linked to each other: the OVS-DPDK tests and the datapath benchmark's DPDK variant use it.

    with SwitchTestbed(options=DpdkOptions(hugepages_mb=256)) as tb:
        sw = tb.add_switch("sw", "dpdk")                      # namespace NAME-sw, bridge NAMEswbr
        a = tb.attach("sw", "a", 1, "10.9.0.1/24")           # namespace NAME-a, veth NAMEa0 <-> NAMEa1
        b = tb.attach("sw", "b", 2, "10.9.0.2/24")
        tb.ofctl("sw", "add-flow", "in_port=1,actions=output:2")

`close()` (also on leaving the `with`, after an exception, SIGINT or SIGTERM) stops every switch (an OVS-DPDK
one gives its hugepages back and unmounts its hugetlbfs), deletes the namespaces (with their veths) and the run
directory; `leftovers()` lists what is still there (for the tests' cleanup checks).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from host_datapath.dpdk_options import DpdkOptions
from host_datapath.host_switch import HostSwitch
from host_datapath.hugepages import SYSFS_2M
from host_datapath.ovs_dpdk import DpdkHostSwitch, check_installed, release_leftovers
from host_datapath.sysutil import (
    DatapathError,
    kill_and_wait,
    netns_del,
    quiet_switch_port,
    run,
    shape,
    veth_pair,
    wait_for,
)
from nf_local.endpoints import http_get_unix, redis_ping
from testkit.traffic import http_get, serve_http

DATAPATHS = ("netdev", "dpdk")


@dataclass(frozen=True)
class Endpoint:
    """A namespace plugged into a switch: its interface `inside`, the switch's end `port` (OpenFlow `ofport`)."""

    key: str
    ns: str
    inside: str
    port: str
    ofport: int
    ip: str  # without the prefix length
    mac: str


class SwitchTestbed:
    __test__ = False  # not a pytest class

    def __init__(
        self,
        name: str | None = None,
        rundir: Path | str = "/run/uno-test",
        options: DpdkOptions | None = None,
    ):
        self.name = name or "d" + uuid.uuid4().hex[:4]
        self.dir = Path(rundir) / self.name
        self.options = options or DpdkOptions(hugepages_mb=256)
        self.switches: dict[str, HostSwitch] = {}
        self.namespaces: list[str] = []
        self.endpoints: dict[str, Endpoint] = {}
        self.procs: list[subprocess.Popen] = []
        self._old_handlers: dict[int, object] = {}

    def __enter__(self) -> SwitchTestbed:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._old_handlers[sig] = signal.signal(sig, _raise_exit)
        self.dir.mkdir(parents=True, exist_ok=False)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- building ------------------------------------------------------------------------------------------
    def _ns(self, key: str) -> str:
        ns = f"{self.name}-{key}"
        if ns not in self.namespaces:
            self.namespaces.append(ns)
        return ns

    def add_switch(self, key: str, datapath: str = "dpdk") -> HostSwitch:
        """A switch in namespace NAME-KEY with bridge NAMEKEYbr, up (netdev: plain OVS; dpdk: OVS-DPDK)."""
        if datapath not in DATAPATHS:
            raise ValueError(f"datapath must be one of {DATAPATHS}, not {datapath!r}")
        ns, rundir, bridge = self._ns(key), self.dir / key, f"{self.name}{key}br"
        if datapath == "dpdk":
            sw: HostSwitch = DpdkHostSwitch(ns, rundir, bridge, options=self.options)
        else:
            sw = HostSwitch(ns, rundir, bridge)
        self.switches[key] = sw
        sw.up()
        return sw

    def attach(
        self, switch: str, key: str, ofport: int, ip_cidr: str | None = None, mac: str | None = None
    ) -> Endpoint:
        """Namespace NAME-KEY plugged into `switch` as OpenFlow port `ofport`, address `ip_cidr` on its veth
        (none for an NF's namespace)."""
        sw = self.switches[switch]
        ns, inside, port = self._ns(key), f"{self.name}{key}0", f"{self.name}{key}1"
        sw.attach_namespace(ns, inside, port, ofport, ip_cidr)
        if mac:
            run(["ip", "link", "set", inside, "address", mac], netns=ns)
        mac = mac or run(["cat", f"/sys/class/net/{inside}/address"], netns=ns).strip()
        ep = Endpoint(key, ns, inside, port, ofport, (ip_cidr or "").split("/")[0], mac)
        self.endpoints[key] = ep
        return ep

    def link(self, a: str, a_ofport: int, b: str, b_ofport: int, gbps: float = 0) -> tuple[str, str]:
        """A veth between switches `a` and `b` (OpenFlow ports `a_ofport`, `b_ofport`), shaped to `gbps` per
        direction when > 0 (tc tbf on both ends, as the emulated host's PCIe link)."""
        sa, sb = self.switches[a], self.switches[b]
        a_if, b_if = f"{self.name}{a}{b}", f"{self.name}{b}{a}"
        veth_pair(a_if, sa.netns, b_if, sb.netns)
        for sw, ifname, ofport in ((sa, a_if, a_ofport), (sb, b_if, b_ofport)):
            quiet_switch_port(ifname, sw.netns)
            if gbps > 0:
                shape(ifname, sw.netns, gbps)
            sw.add_bridge_port(ifname, ofport, shaped=gbps > 0)
        return a_if, b_if

    def ofctl(self, switch: str, *args: str) -> str:
        return self.switches[switch].driver.ofctl(*args)

    def add_flows(self, switch: str, flows: list[str]) -> None:
        self.switches[switch].driver.add_flows(flows)

    # -- processes in the namespaces -------------------------------------------------------------------------
    def spawn(self, key: str, cmd: list[str], log: str | None = None, **kw) -> subprocess.Popen:
        """`cmd` in endpoint `key`'s namespace; killed by close()."""
        out = open(self.dir / (log or f"{key}.log"), "ab")  # noqa: SIM115 - handed to the child
        try:
            p = subprocess.Popen(
                ["ip", "netns", "exec", self.endpoints[key].ns, *cmd],
                stdin=subprocess.DEVNULL,
                stdout=kw.pop("stdout", out),
                stderr=kw.pop("stderr", out),
                start_new_session=True,
                **kw,
            )
        finally:
            out.close()
        self.procs.append(p)
        return p

    def http_server(self, key: str, port: int = 8000) -> Path:
        """`python -m http.server` in endpoint `key` on its address; returns the directory it serves."""
        ep = self.endpoints[key]
        root = self.dir / f"www-{key}"
        root.mkdir(exist_ok=True)
        (root / "hello.txt").write_text(f"hello from {ep.key}\n")
        self.procs.append(serve_http(ep.ns, ep.ip, root, port, self.dir / f"{key}.log"))
        return root

    def http_get(self, key: str, url: str, timeout: float = 5.0) -> bytes:
        """GET `url` from endpoint `key`'s namespace (a child Python process there)."""
        return http_get(self.endpoints[key].ns, url, timeout)

    def start_redis(self) -> str:
        """A redis-server in the root namespace on a unix socket in the run directory (reachable from every
        namespace); returns the NFs' store URL."""
        sock = self.dir / "redis.sock"
        p = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.procs.append(p)
        wait_for(lambda: redis_ping(sock) or p.poll() is not None, 20, "redis-server")
        if p.poll() is not None:
            raise RuntimeError(f"redis-server exited {p.returncode}")
        return f"unix://{sock}"

    def start_nf(
        self, key: str, binary: Path, nf_type: str, config: dict, store: str, nf_id: str, instance: str
    ) -> subprocess.Popen:
        """The `nf` binary on endpoint `key`'s veth (AF_PACKET, one-arm); returns once its /health is 200."""
        cfg = self.dir / f"{instance}.json"
        cfg.write_text(json.dumps(config))
        stats = self.dir / f"{instance}.stats"
        p = self.spawn(
            key,
            [str(binary), nf_type, "--port", self.endpoints[key].inside, "--store", store, "--nf-id", nf_id,
             "--instance", instance, "--config", str(cfg), "--stats", f"unix://{stats}"],
            log=f"{instance}.log", stdout=subprocess.DEVNULL,
        )  # fmt: skip

        def healthy() -> bool:
            if p.poll() is not None:
                log = (self.dir / f"{instance}.log").read_text()[-500:]
                raise RuntimeError(f"nf {instance} exited {p.returncode}: {log}")
            try:
                return http_get_unix(str(stats), "/health")[0] == 200
            except OSError:
                return False

        wait_for(healthy, 30, f"nf {instance} to become healthy", interval=0.1)
        return p

    def nf_stats(self, instance: str) -> dict:
        return json.loads(http_get_unix(str(self.dir / f"{instance}.stats"), "/stats")[1])

    # -- teardown --------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop everything started here; safe to call twice and after a partial bring-up."""
        for p in reversed(self.procs):
            if p.poll() is None:
                kill_and_wait(p.pid)
            with contextlib.suppress(Exception):
                p.wait(timeout=5)
        self.procs.clear()
        for sw in reversed(list(self.switches.values())):
            with contextlib.suppress(Exception):
                sw.down()
        with contextlib.suppress(Exception):
            release_leftovers(self.dir)  # a switch whose down() failed half-way
        for ns in self.namespaces:
            with contextlib.suppress(Exception):
                netns_del(ns)
        shutil.rmtree(self.dir, ignore_errors=True)
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers.clear()

    def leftovers(self) -> list[str]:
        """Namespaces, links, processes, hugetlbfs mounts and the run directory of this testbed still present."""
        ns = run(["ip", "netns", "list"], check=False)
        links = run(["ip", "-o", "link"], check=False)
        out = [line.split()[0] for line in ns.splitlines() if line.startswith(f"{self.name}-")]
        out += [ln.split(":")[1].strip() for ln in links.splitlines() if f" {self.name}" in ln]
        out += [f"mount {m}" for m in Path("/proc/mounts").read_text().splitlines() if str(self.dir) in m]
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                with contextlib.suppress(OSError):
                    if str(self.dir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        out.append(f"process {pid}")
        return out + ([str(self.dir)] if self.dir.exists() else [])


def dpdk_missing() -> str | None:
    """Why this machine cannot run an OVS-DPDK host switch (None: it can)."""
    try:
        check_installed()
    except DatapathError as exc:
        return str(exc)
    if not (SYSFS_2M / "nr_hugepages").exists():
        return f"no 2 MB hugepages in this kernel ({SYSFS_2M} missing)"
    if not os.access(SYSFS_2M / "nr_hugepages", os.W_OK):
        return f"cannot reserve hugepages ({SYSFS_2M / 'nr_hugepages'} not writable)"
    return None


def hugepages_total() -> int:
    return int((SYSFS_2M / "nr_hugepages").read_text())


def wait_ping(ns: str, ip: str, timeout: float = 10.0) -> None:
    """Until one ping from `ns` to `ip` is answered (the first packets can go to a port still coming up)."""

    def answered() -> bool:
        cmd = ["ip", "netns", "exec", ns, "ping", "-c", "1", "-W", "1", ip]
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0

    wait_for(answered, timeout, f"a ping from {ns} to {ip}", interval=0.2)


def _raise_exit(signum, _frame) -> None:
    raise SystemExit(128 + signum)


__all__ = ["DATAPATHS", "Endpoint", "SwitchTestbed", "dpdk_missing", "hugepages_total", "wait_ping"]
