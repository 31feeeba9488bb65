"""`uno run` (= `make run`) end to end as an operator runs it, on real parts: os-ken controller, emulated host
with OneSwitch, the agent, real l7fw and IPS processes, real traffic. `--once` passes and leaves nothing behind;
the live mode refreshes until Ctrl-C and then leaves nothing behind; a Ctrl-C during the bring-up too."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulated_host.oneswitch import jar_missing_reason
from nf_runtime.runtime import NF_BINARY
from testkit.hosts import EMPTY, live_procs, machine_snapshot, needs_root, unique_name

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or ""),
    pytest.mark.skipif(not NF_BINARY.exists(), reason=f"{NF_BINARY} not built (scripts/setup.sh rust)"),
    pytest.mark.skipif(
        not Path(sys.executable).with_name("osken-manager").exists(), reason="osken-manager not in the venv"
    ),
]


def leftovers(name: str) -> dict:
    """machine_snapshot plus what the demo itself starts: controller, agent, traffic tools, its temp dir."""
    snap = machine_snapshot(name)
    snap["demo_procs"] = live_procs(
        lambda args: f"uno-demo-{name}-" in args or f"--name {name} " in args or f"exec {name}-" in args
    )
    snap["demo_tmp"] = sorted(str(p) for p in Path("/tmp").glob(f"uno-demo-{name}-*"))
    return snap


NOTHING = {**EMPTY, "demo_procs": [], "demo_tmp": []}


def start(tmp_path: Path, name: str, *extra: str, wire_vlans: int = 1) -> subprocess.Popen:
    cfg = tmp_path / "host.yaml"
    cfg.write_text(f"rundir: /run/uno-test\nvms: 2\noneswitch:\n  wire_vlans: {wire_vlans}\n")
    return subprocess.Popen([sys.executable, "-m", "uno_cli.main", "run", "--config", str(cfg), "--name", name,
                             *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def read_until(proc: subprocess.Popen, marker: str, lines: list[str]) -> bool:
    for line in proc.stdout:  # bounded by the demo's own timeouts; EOF if it exits
        lines.append(line)
        if marker in line:
            return True
    return False


# wire_vlans 2 (OneSwitch where QinQ may arrive): the demo's rules match untagged frames, which cross PCIe
# under the VLAN tag in both modes, so the whole job (moves included) runs the same.
@pytest.mark.parametrize("wire_vlans", [1, 2])
def test_run_once_chain_traffic_replacement_and_nothing_left(tmp_path, wire_vlans):
    name = unique_name()
    proc = start(tmp_path, name, "--once", wire_vlans=wire_vlans)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out + err
    assert "connected to controller tcp:127.0.0.1:" in out
    assert re.search(r"^web view: http://127\.0\.0\.1:\d+/ui/ ", out, re.M)  # `make run` names the page
    assert "installed 20 steering rules on OneSwitch" in out  # 13 for the chains, 7 for the LB path
    assert "via ips, l7fw, ipsec: ok" in out
    assert "the server saw the client as 198.51.100.1" in out  # through the NAT
    assert "ESP (SPI 0x2001) from the remote site's gateway" in out and "(SPI 0x2002, no cleartext)" in out
    assert "HTTP Host ok.example: 200; Host evil.example: no answer" in out
    assert "GET /EVIL-DEMO-PAYLOAD: no answer (ips drops)" in out
    # the LB path: a connection stays on one backend, connections spread over both, web down -> all to app
    assert re.search(r"one connection, 2 requests to VIP 10\.77\.0\.100:80: answered by (web|app) \(client "
                     r"10\.77\.1\.1:(\d+)\) and \1 \(client 10\.77\.1\.1:\2\): same backend", out)  # fmt: skip
    spread = re.search(r"LB: 6 connections to VIP 10\.77\.0\.100:80 -> web (\d+), app (\d+) .*: ok", out)
    assert spread and int(spread[1]) > 0 and int(spread[2]) > 0 and int(spread[1]) + int(spread[2]) == 6
    assert re.search(r"LB: web marked down in the pool \(.*10\.77\.0\.10:8000 down.*\): 4 new connections -> "
                     r"web 0, app 4: ok", out)  # fmt: skip
    assert re.search(
        r"LB pool in Redis: web 10\.77\.0\.10:8000 up, \d+ active; app 10\.77\.0\.11:8000 up, \d+ active", out
    )
    assert re.search(r"^  lb +lb +(host|snic0) ", out, re.M)  # the live view shows the LB and where it runs
    assert "capacity of snic0" in out
    assert re.search(r"moves: .*\b\w+ snic0 -> host", out)  # the overloaded sNIC is relieved
    assert "after the re-placement: ping ok, HTTP Host ok.example: 200" in out
    assert "host CPU for NFs, predicted:" in out and "PCIe snic0: measured" in out
    # the agent's model holds the real chain web -> ips -> l7fw -> ipsec -> wire: under the iperf3 stream its
    # predicted PCIe use matches the link's counters in direction and size (the ACKs, counted on the stream's
    # side by the model, are a few %)
    shift = out.split("traffic shift:", 1)[1].split("agent re-placement", 1)[0]
    pcie = re.search(
        r"PCIe snic0: measured down ([\d.]+) up ([\d.]+) Mbit/s; predicted down ([\d.]+) up ([\d.]+)", shift
    )
    assert pcie, shift
    m_down, m_up, p_down, p_up = map(float, pcie.groups())
    tolerance = 0.1 * (m_down + m_up) + 1.0  # Mbit/s
    assert m_down + m_up > 10 and abs(p_down - m_down) <= tolerance and abs(p_up - m_up) <= tolerance, pcie[0]
    assert out.rstrip().endswith("demo ok")
    assert leftovers(name) == NOTHING


def test_live_mode_refreshes_until_ctrl_c_then_nothing_left(tmp_path):
    name = unique_name()
    proc = start(tmp_path, name)
    lines: list[str] = []
    try:
        assert read_until(proc, "Ctrl-C", lines), "".join(lines) + proc.stderr.read()
        assert read_until(proc, "--- ", lines), "".join(lines)  # one live refresh
        assert read_until(proc, "4 connections to VIP 10.77.0.100:80 -> ", lines), "".join(lines)
        assert re.search(
            r"LB \(on (host|snic0)\): 4 connections .* -> web \d, app \d; pool: web .* up", lines[-1]
        ), lines[-1]
        assert read_until(proc, "PCIe snic0", lines), "".join(lines)
        assert machine_snapshot(name)["netns"]  # really up
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert leftovers(name) == NOTHING


def test_ctrl_c_during_bring_up_tears_down(tmp_path):
    name = unique_name()
    proc = start(tmp_path, name, "--once")
    lines: list[str] = []
    try:
        assert read_until(proc, "agent http://", lines), "".join(lines) + proc.stderr.read()
        time.sleep(0.5)  # provisioning under way
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
        assert "interrupted: tearing down" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert leftovers(name) == NOTHING


def test_run_on_a_running_host_refuses_and_leaves_it_up(tmp_path):
    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text("rundir: /run/uno-test\nvms: 2\n")
    cli = [sys.executable, "-m", "uno_cli.main"]
    common = ["--config", str(cfg), "--name", name]
    try:
        assert (
            subprocess.run([*cli, "up", *common], cwd=REPO, capture_output=True, timeout=180).returncode == 0
        )
        before = machine_snapshot(name)
        out = subprocess.run([*cli, "run", *common, "--once"], cwd=REPO, capture_output=True, text=True,
                             timeout=180)  # fmt: skip
        assert out.returncode == 2 and "already up" in out.stderr, out.stdout + out.stderr
        assert machine_snapshot(name) == before
        assert leftovers(name)["demo_procs"] == [] and leftovers(name)["demo_tmp"] == []
    finally:
        subprocess.run([*cli, "down", *common], cwd=REPO, capture_output=True, timeout=180)
    assert leftovers(name) == NOTHING


def test_demo_needs_two_vms_and_starts_nothing(tmp_path):
    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text("rundir: /run/uno-test\nvms: 1\n")
    out = subprocess.run([sys.executable, "-m", "uno_cli.main", "run", "--once", "--config", str(cfg), "--name", name],
                         cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 2 and "needs vms >= 2" in out.stderr and "the LB" in out.stderr, (
        out.stdout + out.stderr
    )
    assert leftovers(name) == NOTHING
