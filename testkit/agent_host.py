"""`uno agent serve` as a real process on an emulated host with OneSwitch, and what the agent's end-to-end
tests do with it: a controller's steering rules, iperf3 streams, the placement view's PCIe figures."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from demo.chain import Chain, steering_rules
from emulated_host import agent_endpoint
from emulated_host.oneswitch import jar_missing_reason
from host_datapath.sysutil import run
from nf_agent.client import call
from nf_runtime.runtime import NF_BINARY
from testkit.hosts import EMPTY, machine_snapshot, make_host, needs_root
from testkit.poll import wait

REPO = Path(__file__).resolve().parents[1]
# pytestmark of the agent's end-to-end tests: root, OneSwitch's jar, the NF binary
AGENT_E2E = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or ""),
    pytest.mark.skipif(not NF_BINARY.exists(), reason=f"{NF_BINARY} not built (scripts/setup.sh rust)"),
]
FW_CONFIG = {"rules": [{"action": "allow", "proto": "icmp", "src": "any", "dst": "any"}], "default": "deny"}


class AgentProc:
    def __init__(self, cfg_file: Path, rundir: Path, log: Path):
        self.cfg_file, self.rundir, self.log = cfg_file, rundir, log
        self.proc: subprocess.Popen | None = None

    def start(self, *extra: str) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uno_cli.main", "agent", "serve", "--config", str(self.cfg_file),
             "--sample-interval", "0.5", "--replace-interval", "0", "--log-file", str(self.log), *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        url = self.proc.stdout.readline().strip()
        if not url:
            raise AssertionError(f"agent did not start: {self.proc.stderr.read()}")
        entry = wait(
            lambda: agent_endpoint.status_entry(self.rundir), 30, "agent endpoint file", interval=0.2
        )
        assert entry["rest"] == url and entry["running"]
        return url

    def wait_exit(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def agent_host(
    tmp: Path,
    vms: int = 1,
    snics: list[dict] | None = None,
    agent_args: tuple[str, ...] = (),
    host_cfg: dict | None = None,
    name: str | None = None,
):
    """An emulated host with OneSwitch and `uno agent serve` running on it: (host, status, agent, url); torn
    down (and checked: nothing left) on exit, pass or fail. `snics`: the host config's sNICs (default one);
    `agent_args`: more options of `uno agent serve`; `host_cfg`: the config's `host` (e.g. an external host
    switch); `name`: the host's name (default: a unique one). The config file is `tmp/host.yaml`."""
    extra = {"snics": snics} if snics else {}
    extra |= {"host": host_cfg} if host_cfg else {}
    extra |= {"name": name} if name else {}
    host = make_host(vms=vms, oneswitch={"enabled": True}, **extra)
    cfg_file = tmp / "host.yaml"
    lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in extra.items() if k != "name")  # JSON is YAML
    cfg_file.write_text(f"name: {host.name}\nrundir: /run/uno-test\nvms: {vms}\n{lines}")
    agent = AgentProc(cfg_file, host.rundir, tmp / "agent.log")
    try:
        status = host.up()
        url = agent.start(*agent_args)
        yield host, status, agent, url
    finally:
        host.down()  # with the agent still running: `uno down` stops it first
        exited = agent.proc is None or agent.wait_exit(30)
        agent.stop()
        assert exited, "the agent kept running after `uno down`"
        assert machine_snapshot(host.name) == EMPTY


def agent_state(host) -> dict:
    return json.loads((host.rundir / "agent" / "state.json").read_text())


def instance(host, nf_id: str) -> dict:
    return agent_state(host)["nfs"][nf_id]["instances"][0]


def ofctl(status: dict, *args: str) -> str:
    return run(["ovs-ofctl", "-O", "OpenFlow13", *args])


def install_chain(status: dict, chain: Chain) -> None:
    """Replace OneSwitch's rules by the steering rules of `chain` (demo.chain), as a controller."""
    listen = status["oneswitch"]["listen"]
    ofctl(status, "del-flows", listen)
    for r in steering_rules(chain):
        macs = (f",dl_src={r.eth_src}" if r.eth_src else "") + (f",dl_dst={r.eth_dst}" if r.eth_dst else "")
        ofctl(
            status,
            "add-flow",
            listen,
            f"priority={r.priority},in_port={r.in_port}{macs},actions=output:{r.out_port}",
        )


def iperf3(
    server_ns: str, client_ns: str, server_ip: str, port: int, *client_args: str
) -> list[subprocess.Popen]:
    """A one-shot iperf3 server and its client (started 0.5 s later); the caller kills both."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen(["ip", "netns", "exec", server_ns, "iperf3", "-s", "-1", "-B", server_ip, "-p",
                               str(port)], **quiet)]  # fmt: skip
    time.sleep(0.5)
    procs.append(subprocess.Popen(["ip", "netns", "exec", client_ns, "iperf3", "-c", server_ip, "-p", str(port),
                                   *client_args], **quiet))  # fmt: skip
    return procs


def wait_pcie(url: str, what: str, min_gbps: float = 0.02) -> dict:
    """GET /v1/placement once the link's measured PCIe down rate shows a stream (> `min_gbps`), then 2 s more:
    a few samples at the stream's rate (the model and the link's counters share them)."""

    def streaming():
        v = call(url, "GET", "/v1/placement")[1]
        down = (v["measured"] or {}).get("pcie_gbps", {}).get("snic0", {}).get("down", 0)
        return v if down > min_gbps else None

    wait(streaming, 30, what, interval=0.2)
    time.sleep(2)
    return call(url, "GET", "/v1/placement")[1]


def crossings(view: dict, snic: str) -> dict[str, float]:
    """The model's PCIe crossings of the NFs on `snic`'s link: predicted link load minus the background (the
    measured traffic it does not explain), so a test of the model is not satisfied by the background."""
    p, bg = view["predicted"]["pcie_gbps"][snic], view["predicted"]["background_gbps"][snic]
    return {d: p[d] - bg[d] for d in ("down", "up")}
