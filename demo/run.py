"""`uno run` with OneSwitch: the demo service chain, end to end, on real parts.

Brings up an os-ken controller (demo/osken_chain.py), the emulated host with OneSwitch connected to
it, and `uno agent serve`; provisions through the agent's REST API two VMs and two chains (placed by the
agent): outside -> IPsec gateway -> L7 firewall -> IPS -> VM `web`, VM `app` -> NAT -> outside, and a load
balancer (`nf lb`) whose virtual IP spreads TCP connections from the outside over HTTP servers in both VMs;
writes the chains' description, which the controller turns into steering rules on OneSwitch; drives traffic
(ping, HTTP allowed and blocked, ESP from a remote site's gateway through the IPsec gateway, HTTP through the
NAT, connections to the VIP spread over both backends, and all on one when the other is marked down in the
LB's pool); shows what runs where, host CPU saved, PCIe use and traffic per NF; then floods the web chain so that the agent's
re-placement moves the IPS from the sNIC to the host, and shows that. Teardown always runs."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import redis

from demo import esp
from demo import lb as lbp
from demo.view import format_move, format_view
from domain.errors import CliError
from emulated_host import naming as nm
from emulated_host.host import AlreadyRunning, EmulatedHost, ping
from host_datapath import sysutil
from host_datapath.oneswitch_client import OneSwitchError
from host_datapath.sysutil import free_port
from nf_agent.client import call
from nf_agent.graph import chain_links, eth_vertex
from nf_runtime.runtime import NF_BINARY
from placement.profiles import EMULATED_PROFILES, profile_file
from snic_datapath.cgroup import CpuCgroup

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")
APP = Path(__file__).with_name("osken_chain.py")
# Every profile is the one measured on the emulated host (placement/profiles-emulated.json) except the IPS's
# r_nic, scaled by IPS_DEMO_NIC_FACTOR. Measured, an sNIC of 0.5 core takes ~0.5 Gbit/s through its NFs, but
# this shared 2-core machine pushes only ~100 Mbit/s through the whole chain, so the traffic shift would never
# fill it; a smaller sNIC quota does not help either: the throttled NFs drop bursts, TCP collapses to a few
# Mbit/s and the measured load (which is all the model sees) stays small. The factor stands for a slow sNIC
# core (UNO measured DPI at 2x the host's cost on a real sNIC; an emulated sNIC runs on host cores).
IPS_DEMO_NIC_FACTOR = 10.0
IPS_CONFIG = {
    "signatures": [{"id": 1001, "msg": "demo exploit", "content": "EVIL-DEMO-PAYLOAD"}],
    "action": "drop",
}
L7FW_CONFIG = {"block": [{"proto": "http", "host": "evil.example"}], "default": "allow", "unparsed": "allow"}
PUBLIC_IP = "198.51.100.1"  # the NAT's public address
NAT_CONFIG = {"inside": ["10.77.0.0/24"], "public_ips": [PUBLIC_IP], "ports": "20000-29999"}
# VM web: outside -> ipsec -> l7fw -> ips -> web (wire side first; created in this order, steered VM side first)
# (id, type, hint); the IPsec gateway's config is made per run (fresh keys)
CHAIN = [("ipsec", "ipsec", "snic0"), ("l7fw", "l7fw", "host"), ("ips", "ips", "snic0")]
NAT_CHAIN = [("nat", "nat", "host")]  # VM app -> nat -> outside
LB = ("lb", "lb", "snic0")  # outside -> VIP -> lb -> web or app, and back through lb
BACKENDS = (("web", 0), ("app", 1))  # (VM id, VM index): an HTTP server on each behind the LB's VIP
WIRE = eth_vertex("snic0", 0)  # the outside, as a vertex of the agent's placement graph
# The chains as the agent's placement graph holds them (declared with PATCH /v1/nfs/ID once all NFs exist), in
# the direction of the bulk traffic (iperf3 web -> outside). An NF is one-arm: its port's counters carry both
# directions, so the model's directed edge a -> b carries the stream and its ACKs (b -> a), and counts them
# on the stream's side of PCIe (the ACKs are a few % of the stream). The graph holds one dst per NF: the LB's
# is web, though it spreads connections over web and app; both are VMs on the host, so the NF loads and the
# PCIe crossings are the same as with the split.
GRAPH_CHAINS = (
    ["web", *(c[0] for c in reversed(CHAIN)), WIRE],
    ["app", *(c[0] for c in NAT_CHAIN), WIRE],
    [WIRE, LB[0], BACKENDS[0][0]],
)
HTTP_PORT = 8080


def wait_for(pred: Callable[[], T], timeout: float, what: str) -> T:
    """`sysutil.wait_for` polling every 0.3 s, a timeout being the operator's error (CliError)."""
    return sysutil.wait_for(pred, timeout, what, interval=0.3, error=CliError)


def _stop_proc(proc: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def demo_profiles() -> dict:
    """The profile file the demo's agent predicts with: the emulated host's (every field the placement reads:
    costs, NF latencies, the PCIe links' crossing latency), the IPS's r_nic scaled by IPS_DEMO_NIC_FACTOR."""
    prof = profile_file(EMULATED_PROFILES)
    prof["ips"] = {**prof["ips"], "r_nic": round(prof["ips"]["r_nic"] * IPS_DEMO_NIC_FACTOR, 4)}
    return prof


class Demo:
    """One demo run. `run()` returns the exit code; `teardown()` (idempotent) removes everything it started."""

    def __init__(self, host: EmulatedHost, config: str | None, once: bool, out=print):
        if host.config.vms < 2:
            raise CliError(
                "the demo needs vms >= 2 (VM web behind the IPsec chain, VM app behind the NAT, both behind the LB)"
            )
        self.once, self.out = once, out
        self.config = config
        self.tmp = Path(tempfile.mkdtemp(prefix=f"uno-demo-{host.name}-"))
        self.port = free_port()
        cfg = host.config
        ctl = f"tcp:127.0.0.1:{self.port}"
        self.host = EmulatedHost(replace(cfg, oneswitch=replace(cfg.oneswitch, controllers=(ctl,))))
        self.name = host.name
        self.chain_file = self.tmp / "chain.json"
        self.controller: subprocess.Popen | None = None
        self.agent: subprocess.Popen | None = None
        self.procs: list[subprocess.Popen] = []  # traffic helpers
        self.url = ""
        self.host_started = False
        self._cg_last: tuple[float, float] | None = None
        self.ipsec_gw, self.ipsec_peer = esp.sa_configs(nm.ip_vm(0), nm.ip_outside(0, 0))
        self.configs = {"ipsec": self.ipsec_gw, "l7fw": L7FW_CONFIG, "ips": IPS_CONFIG, "nat": NAT_CONFIG,
                        "lb": lbp.lb_config(nm.ip_vm(i) for _, i in BACKENDS)}  # fmt: skip
        self.redis_url = ""

    # -- bring-up ----------------------------------------------------------------------------------------
    def start_controller(self) -> None:
        mgr = Path(sys.executable).with_name("osken-manager")
        if not mgr.exists():
            raise CliError(f"{mgr} not found (scripts/setup.sh python installs os-ken with faucet)")
        log = open(self.tmp / "controller.log", "w")  # noqa: SIM115 - closed with the process
        self.controller = subprocess.Popen(
            [str(mgr), "--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(self.port), str(APP)],
            cwd=REPO, env={"UNO_DEMO_CHAIN": str(self.chain_file), "PATH": "/usr/bin:/bin",
                           "PYTHONPATH": str(REPO)},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

        def listening() -> bool:
            if self.controller.poll() is not None:
                raise CliError(f"controller exited: {(self.tmp / 'controller.log').read_text()[-500:]}")
            # the controller itself, not another program that took the port meanwhile (a bare connect)
            return sysutil.session_listens(self.controller.pid, self.port)

        wait_for(listening, 30, "the os-ken controller to listen")

    def start_agent(self) -> None:
        (self.tmp / "profiles.json").write_text(json.dumps(demo_profiles()))
        cmd = [sys.executable, "-m", "uno_cli.main", "agent", "serve", "--name", self.name,
               "--profiles", str(self.tmp / "profiles.json"), "--sample-interval", "1",
               "--replace-interval", "0", "--dampening", "0",
               "--log-file", str(self.tmp / "agent.log")]  # fmt: skip
        if self.config:
            cmd[5:5] = ["--config", self.config]
        self.agent = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True)  # fmt: skip
        self.url = self.agent.stdout.readline().strip()
        if not self.url:
            raise CliError(f"the agent did not start: {self.agent.stderr.read()[-500:]}")

    def provision(self) -> dict[str, int]:
        for vm in ("web", "app"):
            code, body = call(self.url, "POST", "/v1/vms", {"id": vm})
            if code != 201:
                raise CliError(f"POST /v1/vms {vm}: {code} {body}")
        vports = {}
        for nf_id, typ, prefer in (*CHAIN, *NAT_CHAIN, LB):
            req = {"type": typ, "id": nf_id, "config": self.configs[nf_id], "expected": {"gbps": 0},
                   "hints": {"prefer": prefer}}  # fmt: skip
            code, body = call(self.url, "POST", "/v1/nfs", req)
            if code != 201:
                raise CliError(f"POST /v1/nfs {nf_id}: {code} {body}")
            vports[nf_id] = body["vport"]
        for nf_id, src, dst in (link for path in GRAPH_CHAINS for link in chain_links(path)):
            code, body = call(self.url, "PATCH", f"/v1/nfs/{nf_id}", {"expected": {"src": src, "dst": dst}})
            if code != 200:
                raise CliError(f"PATCH /v1/nfs/{nf_id}: {code} {body}")
        out = {"out_port": nm.vport_eth(0, 0), "out_mac": nm.mac(2, 0, 0)}
        web = {"vm_port": nm.vport_vm(0), "vm_mac": nm.mac(1, 0, 0), **out,
               "nf_ports": [vports[c[0]] for c in reversed(CHAIN)]}  # fmt: skip
        app = {"vm_port": nm.vport_vm(1), "vm_mac": nm.mac(1, 0, 1), **out,
               "nf_ports": [vports[c[0]] for c in NAT_CHAIN]}  # fmt: skip
        backends = [{"vm_port": nm.vport_vm(i), "vm_mac": nm.mac(1, 0, i), "ip": nm.ip_vm(i),
                     "port": lbp.BACKEND_PORT} for _, i in BACKENDS]  # fmt: skip
        lb = {"port": vports["lb"], "vip": lbp.VIP, "vip_port": lbp.VIP_PORT, "backends": backends}
        chain = {"chains": [web, app], "lb": lb}
        tmp = self.chain_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(chain))
        tmp.replace(self.chain_file)
        mtime = self.chain_file.stat().st_mtime
        installed = Path(f"{self.chain_file}.installed")

        def done():
            err = Path(f"{self.chain_file}.error")
            if err.exists():
                raise CliError(f"controller: {err.read_text().strip()}")
            return installed.exists() and json.loads(installed.read_text())["mtime"] == mtime

        wait_for(done, 60, "the controller to install the chain on OneSwitch")
        self.out(f"controller (os-ken, {APP.name}) installed {json.loads(installed.read_text())['rules']} "
                 f"steering rules on OneSwitch: web -> ips -> l7fw -> ipsec -> outside, app -> nat -> outside, "
                 f"and back; outside -> VIP {lbp.VIP}:{lbp.VIP_PORT} -> lb -> web | app, and back through lb")  # fmt: skip
        return vports

    # -- traffic -----------------------------------------------------------------------------------------
    def ns(self, which: str, *cmd: str) -> list[str]:
        """`cmd` in the namespace of VM web ("vm"), VM app ("app") or the outside."""
        netns = {"vm": nm.ns_vm(self.name, 0), "app": nm.ns_vm(self.name, 1)}.get(which)
        return ["ip", "netns", "exec", netns or nm.ns_outside(self.name, 0, 0), *cmd]

    def http_get(self, host_header: str, path: str = "/", vm: str = "vm") -> str:
        url = f"http://{nm.ip_outside(0, 0)}:{HTTP_PORT}{path}"
        r = subprocess.run(self.ns(vm, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "3",
                                   "-H", f"Host: {host_header}", url), capture_output=True, text=True)  # fmt: skip
        return r.stdout.strip() if r.stdout.strip() not in ("", "000") else "no answer"

    def traffic_checks(self) -> bool:
        out_ip = nm.ip_outside(0, 0)
        ok = wait_for(lambda: ping(nm.ns_vm(self.name, 0), out_ip, count=2), 30, "ping through the chain")
        self.out(
            f"ping web ({nm.ip_vm(0)}) -> outside ({out_ip}) via ips, l7fw, ipsec: {'ok' if ok else 'FAILED'}"
        )
        with open(self.tmp / "http.log", "w") as log:  # the server logs each client's address
            srv = subprocess.Popen(self.ns("outside", sys.executable, "-m", "http.server", "-b", out_ip,
                                           str(HTTP_PORT)), stdout=subprocess.DEVNULL, stderr=log,
                                   cwd=self.tmp)  # fmt: skip
        self.procs.append(srv)
        wait_for(lambda: self.http_get("ok.example") == "200", 20, "the HTTP server in the outside namespace")
        good, evil = self.http_get("ok.example"), self.http_get("evil.example")
        attack = self.http_get("ok.example", "/EVIL-DEMO-PAYLOAD")
        self.out(f"HTTP Host ok.example: {good}; Host evil.example: {evil} (l7fw blocks); "
                 f"GET /EVIL-DEMO-PAYLOAD: {attack} (ips drops)")  # fmt: skip
        ok = good == "200" and evil == "no answer" and attack == "no answer"
        nat, ipsec, lb = self.nat_check(), self.ipsec_check(), self.lb_check()
        return ok and nat and ipsec and lb

    def nat_check(self) -> bool:
        """HTTP from VM app through the NAT: the server must see the public address."""
        out_if = nm.if_eth(self.name, 0, 0)[1]
        for cmd in (["ip", "route", "replace", f"{PUBLIC_IP}/32", "dev", out_if],
                    ["ip", "neigh", "replace", PUBLIC_IP, "lladdr", nm.mac(1, 0, 1), "dev", out_if]):  # fmt: skip
            subprocess.run(self.ns("outside", *cmd), check=True, capture_output=True)
        code = self.http_get("ok.example", "/?from-app", vm="app")
        seen = [
            ln.split()[0] for ln in (self.tmp / "http.log").read_text().splitlines() if "/?from-app" in ln
        ]
        self.out(f"NAT: HTTP app ({nm.ip_vm(1)}) -> outside: {code}; the server saw the client as "
                 f"{seen[-1] if seen else 'nobody'} (nat's public address {PUBLIC_IP})")  # fmt: skip
        return code == "200" and bool(seen) and seen[-1] == PUBLIC_IP

    # -- the LB path ---------------------------------------------------------------------------------------
    def vip_get(self, *paths: str) -> list[tuple[str, str]]:
        """GET the paths from the outside over one connection to the VIP; the backends' answers."""
        urls = [f"http://{lbp.VIP}:{lbp.VIP_PORT}{p}" for p in paths]
        r = subprocess.run(self.ns("outside", "curl", "-s", "-m", "3", *urls), capture_output=True, text=True)
        return lbp.parse_answers(r.stdout, [b for b, _ in BACKENDS])

    def vip_connections(self, n: int) -> dict[str, int]:
        """n connections to the VIP, one after the other; connections per backend."""
        answers = [a for _ in range(n) for a in self.vip_get("/")]
        return lbp.spread(answers, [b for b, _ in BACKENDS])

    def lb_backend(self, vm_index: int, state: str) -> str:
        """Mark a backend up/down in the LB's pool (Redis) with `nf lb-backend`; the pool it prints."""
        r = subprocess.run([str(NF_BINARY), "lb-backend", "--store", self.redis_url, "--nf-id", LB[0],
                            "--backend", f"{nm.ip_vm(vm_index)}:{lbp.BACKEND_PORT}", "--state", state],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
        if r.returncode != 0:
            raise CliError(f"nf lb-backend --state {state}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        return " | ".join(ln.strip() for ln in r.stdout.splitlines() if ln.strip())

    def lb_pool(self) -> str:
        """The LB's backend pool and active-connection counters, read from the host's Redis."""
        addrs = {f"{nm.ip_vm(i)}:{lbp.BACKEND_PORT}": vm for vm, i in BACKENDS}
        pool_key, conn_keys = lbp.pool_keys(LB[0], addrs)
        try:
            r = redis.Redis.from_url(self.redis_url, socket_timeout=2, socket_connect_timeout=2)
            with r:
                values = r.mget([pool_key, *conn_keys.values()])
        except redis.RedisError as exc:
            return f"Redis: {exc}"
        return lbp.format_pool(values[0], dict(zip(conn_keys, values[1:], strict=True)), addrs)

    def lb_check(self) -> bool:
        """An HTTP server in each VM behind the VIP: the outside's connections spread over both, a connection
        stays on its backend, and with web marked down in the pool new connections all go to app."""
        for vm, i in BACKENDS:
            self.procs.append(subprocess.Popen(
                self.ns("vm" if i == 0 else "app", sys.executable, "-c", lbp.BACKEND_SERVER, vm, nm.ip_vm(i),
                        str(lbp.BACKEND_PORT)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        out_if = nm.if_eth(self.name, 0, 0)[1]
        subprocess.run(self.ns("outside", "ip", "neigh", "replace", lbp.VIP, "lladdr", lbp.VIP_MAC, "dev", out_if),
                       check=True, capture_output=True)  # fmt: skip
        wait_for(lambda: self.vip_get("/"), 30, f"the VIP {lbp.VIP}:{lbp.VIP_PORT} to answer through the LB")
        one = self.vip_get("/a", "/b")
        same = len(one) == 2 and one[0] == one[1]
        self.out(f"LB: one connection, 2 requests to VIP {lbp.VIP}:{lbp.VIP_PORT}: answered by "
                 f"{' and '.join(f'{b} (client {c})' for b, c in one) or 'nobody'}: "
                 f"{'same backend' if same else 'FAILED'}")  # fmt: skip
        n = 6
        counts = self.vip_connections(n)
        spread_ok = sum(counts.values()) == n and all(counts.values())
        self.out(f"LB: {n} connections to VIP {lbp.VIP}:{lbp.VIP_PORT} -> {lbp.format_spread(counts)} "
                 f"(fewest active connections first): {'ok' if spread_ok else 'FAILED'}")  # fmt: skip
        self.out(f"LB pool in Redis: {self.lb_pool()} (closed connections count until their close timeout)")
        pool = self.lb_backend(0, "down")
        down = self.vip_connections(4)
        self.lb_backend(0, "up")
        down_ok = down == {"web": 0, "app": 4}
        self.out(f"LB: web marked down in the pool ({pool}): 4 new connections -> {lbp.format_spread(down)}: "
                 f"{'ok' if down_ok else 'FAILED'}; web marked up again")  # fmt: skip
        return same and spread_ok and down_ok

    def ipsec_check(self) -> bool:
        """Site-to-site ESP: the remote site's gateway (nf ipsec in pcap mode, esp.py) encapsulates a datagram
        of a remote host to VM web; it is sent as ESP from the outside namespace; the agent's IPsec gateway
        decapsulates it, web answers, the gateway encapsulates the answer, which the outside captures and the
        peer decapsulates."""
        d, out_if = self.tmp / "esp", nm.if_eth(self.name, 0, 0)[1]
        d.mkdir(exist_ok=True)
        (d / "peer.json").write_text(json.dumps(self.ipsec_peer))
        msg = f"HELLO-OVER-ESP-{self.name}".encode()
        clear = esp.udp_frame(nm.mac(2, 0, 0), nm.mac(1, 0, 0), esp.REMOTE_HOST, nm.ip_vm(0), esp.UDP_PORT,
                              esp.UDP_PORT, msg)  # fmt: skip
        (d / "clear.pcap").write_bytes(esp.write_pcap([clear]))

        def peer(src: str, dst: str) -> list[bytes]:
            subprocess.run([str(NF_BINARY), "ipsec", "--pcap-in", str(d / src), "--pcap-out", str(d / dst),
                            "--store", "local", "--nf-id", "site-peer", "--instance", "peer",
                            "--config", str(d / "peer.json")], check=True, capture_output=True, timeout=60)  # fmt: skip
            return esp.read_pcap((d / dst).read_bytes())

        sent = peer("clear.pcap", "esp.pcap")
        (d / "send.pcap").write_bytes(esp.write_pcap(sent))
        vm_route = ["ip", "route", "replace", esp.REMOTE_NET, "via", nm.ip_outside(0, 0)]
        subprocess.run(self.ns("vm", *vm_route), check=True, capture_output=True)
        echo = subprocess.Popen(self.ns("vm", sys.executable, "-c", esp.ECHO, nm.ip_vm(0), str(esp.UDP_PORT)),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        cap = subprocess.Popen(self.ns("outside", "tcpdump", "-i", out_if, "-U", "-c", "1", "-w", str(d / "back.pcap"),
                                       f"ip proto 50 and src host {esp.GW_TUNNEL_IP}"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        self.procs += [echo, cap]
        time.sleep(1.0)  # the listener binds, tcpdump attaches
        subprocess.run(self.ns("outside", sys.executable, "-c", esp.SEND, out_if, str(d / "send.pcap")),
                       check=True, capture_output=True, timeout=30)  # fmt: skip
        got, back, raw_back = "", [], b""
        try:
            got = echo.communicate(timeout=30)[0].strip()
            cap.wait(timeout=15)
            raw_back = (d / "back.pcap").read_bytes()
            back = peer("back.pcap", "back-clear.pcap")
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError, ValueError) as exc:
            self.out(f"IPsec: FAILED ({type(exc).__name__}); web got {got!r}")
            return False
        spi = esp.esp_spi(sent[0]) if sent else None
        spi_back = esp.esp_spi(esp.read_pcap(raw_back)[0]) if raw_back else None
        answer = esp.udp_payload(back[0]) if back else None
        ok = (spi == esp.SPI_IN and spi_back == esp.SPI_OUT and got == f"{esp.REMOTE_HOST} {msg.decode()}"
              and answer == (nm.ip_vm(0), b"REPLY:" + msg) and b"REPLY:" not in raw_back)  # fmt: skip
        self.out(f"IPsec: ESP (SPI {spi or 0:#x}) from the remote site's gateway -> ipsec decapsulates -> web got "
                 f"{got.split(' ', 1)[-1]!r} from {esp.REMOTE_HOST}; its answer left as ESP (SPI {spi_back or 0:#x}, "
                 f"no cleartext), the peer decapsulated {answer[1].decode(errors='replace') if answer else None!r}: "
                 f"{'ok' if ok else 'FAILED'}")  # fmt: skip
        return ok

    def iperf_start(self, seconds: int) -> subprocess.Popen:
        """iperf3 TCP web -> outside through the chain, in the background; `iperf_result` reads it."""
        ip = nm.ip_outside(0, 0)
        srv = subprocess.Popen(self.ns("outside", "iperf3", "-s", "-1", "-B", ip, "-p", "5399"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        self.procs.append(srv)
        time.sleep(0.5)
        cli = subprocess.Popen(self.ns("vm", "iperf3", "-c", ip, "-p", "5399", "-t", str(seconds), "-J"),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        self.procs.append(cli)
        return cli

    @staticmethod
    def iperf_result(cli: subprocess.Popen, timeout: float) -> tuple[float, list[float]]:
        """Received Mbit/s of a finished iperf3 client and the sender's Mbit/s per second (0, [] if it failed)."""
        try:
            res = json.loads(cli.communicate(timeout=timeout)[0])
            per_s = [i["sum"]["bits_per_second"] / 1e6 for i in res["intervals"]]
            return res["end"]["sum_received"]["bits_per_second"] / 1e6, per_s
        except (ValueError, KeyError, TypeError, subprocess.TimeoutExpired):
            return 0.0, []

    def show(self) -> dict:
        view = call(self.url, "GET", "/v1/placement")[1]
        nfs = {n["id"]: n for n in call(self.url, "GET", "/v1/nfs")[1]}
        prof = json.loads((self.tmp / "profiles.json").read_text())
        for line in format_view(view, nfs, prof):
            self.out(line)
        self.show_cgroup()
        return view

    def show_cgroup(self) -> None:
        """The sNIC's cgroup CPU accounting since the previous refresh (what sNIC-placed NFs used there)."""
        cg = CpuCgroup(nm.cgroup_snic(self.name, 0))
        try:
            now, used = time.monotonic(), cg.usage_seconds()
        except OSError:
            return
        if self._cg_last is not None:
            t0, u0 = self._cg_last
            self.out(f"  sNIC snic0 cgroup CPU (NFs placed there): {(used - u0) / max(now - t0, 1e-6):.4f} cores "
                     f"over the last {now - t0:.1f} s")  # fmt: skip
        self._cg_last = (now, used)

    def shift(self) -> tuple[dict, float]:
        """iperf3 through the chain until the model sees the sNIC overloaded; run the agent's re-placement
        while the stream goes on. Returns the decision and the stream's received Mbit/s."""
        seconds = 14
        self.out(f"traffic shift: iperf3 TCP web -> outside through the chain for {seconds} s")
        cli = self.iperf_start(seconds)

        def overloaded():
            if cli.poll() is not None:
                rate, per_s = self.iperf_result(cli, 5)
                raise CliError(f"iperf3 through the chain ended ({rate:.0f} Mbit/s; per second: "
                               f"{' '.join(f'{x:.0f}' for x in per_s)}) before the sNIC was overloaded")  # fmt: skip
            v = call(self.url, "GET", "/v1/placement")[1]
            return v if (v["predicted"] or {}).get("violations") else None

        view = wait_for(overloaded, 30, "the measured load to overload the sNIC in the agent's model")
        self.out(f"agent's model: {'; '.join(view['predicted']['violations'])}")
        # The model sees the overload while the stream still ramps up, and the host's and the sNIC's counters
        # are read a round trip apart: at a rising rate the two disagree. Two samples later they compare at
        # the stream's steady rate.
        since = float((view.get("measured") or {}).get("t", 0.0))
        wait_for(lambda: self._measured_since(since, 1.5), 10, "two more monitoring samples")
        self.show()
        code, d = call(self.url, "POST", "/v1/placement/run", {})
        if code != 200:
            raise CliError(f"POST /v1/placement/run: {code} {d}")
        moves = ", ".join(f"{m['id']} {m['from']} -> {m['to']}" for m in d.get("moves", [])) or "none"
        self.out(f"agent re-placement (POST /v1/placement/run): go={d['go']}, moves: {moves}")
        for m in d.get("moves", []) if d.get("go") else []:
            self.out(format_move(m))  # each step's time (ms): what the stream waited for
        rate, per_s = self.iperf_result(cli, seconds + 60)
        self.out(f"iperf3 TCP through the chain, across the re-placement: {rate:.0f} Mbit/s received; "
                 f"per second: {' '.join(f'{x:.0f}' for x in per_s)}")  # fmt: skip
        return d, rate

    def _measured_since(self, since: float, seconds: float) -> bool:
        m = call(self.url, "GET", "/v1/placement")[1].get("measured") or {}
        return float(m.get("t", 0.0)) >= since + seconds

    # -- the whole run -----------------------------------------------------------------------------------
    def run(self, stop_wait: Callable[[float], bool]) -> int:
        self.start_controller()
        self.host_started = True  # a failed bring-up is torn down too
        try:
            status = self.host.up()
            self.redis_url = f"redis://127.0.0.1:{status['redis']['port']}"
        except AlreadyRunning as exc:  # someone else's running host: leave it exactly as it is
            self.host_started = False
            raise CliError(f"{exc}; run `uno down` first") from None
        self.out(f"emulated host '{self.name}' is up; OneSwitch {status['oneswitch']['listen']} connected to "
                 f"controller tcp:127.0.0.1:{self.port}")  # fmt: skip
        wait_for(self._controller_connected, 60, "OneSwitch to connect to the controller")
        self.start_agent()
        self.out(f"agent {self.url} (profiles measured on the emulated host, {EMULATED_PROFILES.name}; demo: "
                 f"IPS r_nic x{IPS_DEMO_NIC_FACTOR:g}, a slow sNIC core, so that the ~100 Mbit/s this machine pushes "
                 f"through the chain fills the sNIC)")  # fmt: skip
        self.out(f"web view: {self.url}/ui/ (live: the host, the chain's Gbit/s, PCIe, CPU, moves; open it in a "
                 f"browser on this machine)")  # fmt: skip
        self.provision()
        ok = self.traffic_checks()
        time.sleep(2)  # a few monitoring samples of the light traffic
        self.out("light traffic (ping, HTTP):")
        self.show()
        d, rate = self.shift()
        moved = any(m["from"] == "snic0" and m["to"] == "host" for m in d.get("moves", []))
        ok = ok and moved and rate > 0
        pinged = wait_for(lambda: ping(nm.ns_vm(self.name, 0), nm.ip_outside(0, 0), count=2), 30,
                          "ping after the re-placement")  # fmt: skip
        http = self.http_get("ok.example")
        self.out(f"after the re-placement: ping {'ok' if pinged else 'FAILED'}, HTTP Host ok.example: {http}")
        ok = ok and http == "200"
        self.show()
        if self.once:
            self.out(f"demo {'ok' if ok else 'FAILED'}")
            return 0 if ok else 1
        self.out("demo is up: ping 5/s, every 30 s a 10 s iperf3 burst; every 5 s the view and the agent's "
                 "re-placement; Ctrl-C tears it all down")  # fmt: skip
        pinger = subprocess.Popen(self.ns("vm", "ping", "-q", "-i", "0.2", nm.ip_outside(0, 0)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        self.procs.append(pinger)
        tick, burst = 0, None
        while not stop_wait(5.0):
            tick += 1
            self.out(f"--- {time.strftime('%H:%M:%S')}")
            if burst is None and tick % 6 == 0:
                self.out("traffic shift: iperf3 TCP web -> outside for 10 s")
                burst = self.iperf_start(10)
            elif burst is not None and burst.poll() is not None:
                rate, _ = self.iperf_result(burst, 5)
                self.out(f"iperf3 burst done: {rate:.0f} Mbit/s received; back to ping only")
                burst = None
            where = {n["id"]: n for n in call(self.url, "GET", "/v1/nfs")[1]}.get(LB[0], {}).get(
                "location", "?"
            )
            self.out(f"LB (on {where}): 4 connections to VIP {lbp.VIP}:{lbp.VIP_PORT} -> "
                     f"{lbp.format_spread(self.vip_connections(4))}; pool: {self.lb_pool()}")  # fmt: skip
            self.show()
            code, d = call(self.url, "POST", "/v1/placement/run", {})
            if code == 200 and d.get("go"):
                moves = ", ".join(f"{m['id']} {m['from']} -> {m['to']}" for m in d.get("moves", []))
                self.out(f"agent re-placement: {moves}")
        return 0

    def _controller_connected(self) -> bool:
        try:
            return any(c.get("connected") for c in self.host.oneswitch().client().health().controllers)
        except (OSError, ValueError, OneSwitchError):
            return False

    def teardown(self) -> bool:
        """Stop everything this run started; True when it had brought the host up (and took it down)."""
        for p in self.procs:
            _stop_proc(p, signal.SIGKILL)
        self.procs = []
        _stop_proc(self.agent)
        took_down = self.host_started
        try:
            if self.host_started:
                self.host_started = False
                self.host.down()
        finally:  # a failed host teardown must not leave the controller or the temp dir behind
            _stop_proc(self.controller)
            shutil.rmtree(self.tmp, ignore_errors=True)
        return took_down
