"""`uno up / status / down` as an operator runs them (real OVS), and `down --all`."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from testkit.hosts import needs_root, unique_name

pytestmark = [pytest.mark.root, needs_root]
REPO = Path(__file__).resolve().parents[2]


def uno(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "uno_cli.main", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_up_status_json_second_up_and_down_all(tmp_path):
    rundir = Path(f"/run/uno-test/cli{uuid.uuid4().hex[:6]}")
    cfg = tmp_path / "host.yaml"
    cfg.write_text(f"rundir: {rundir}\nvms: 1\nsnics:\n  - pcie_gbps: 0\noneswitch: {{enabled: false}}\n")
    names = [unique_name(), unique_name()]
    try:
        for n in names:
            assert uno("up", "--config", str(cfg), "--name", n).returncode == 0
        st = uno("status", "--config", str(cfg), "--name", names[0], "--json")
        assert st.returncode == 0, st.stderr
        status = json.loads(st.stdout)
        assert {"host", "snics", "redis", "vms"} <= set(status) and status["up"] is True
        assert status["host"]["openflow_tcp"].startswith("tcp:127.0.0.1:")
        again = uno("up", "--config", str(cfg), "--name", names[0])
        assert again.returncode == 0 and "already up" in again.stderr
        assert json.loads(uno("status", "--config", str(cfg), "--name", names[0], "--json").stdout) == status
        down = uno("down", "--config", str(cfg), "--all")
        assert down.returncode == 0, down.stderr
        for n in names:
            assert uno("status", "--config", str(cfg), "--name", n).returncode == 1
            netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            assert f"{n}-" not in netns
    finally:
        for n in names:
            uno("down", "--config", str(cfg), "--name", n)
        if rundir.exists():
            rundir.rmdir()


def test_run_once_pings_through_the_path_and_leaves_nothing(tmp_path):
    from testkit.hosts import EMPTY, machine_snapshot

    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text("rundir: /run/uno-test\nvms: 1\noneswitch: {enabled: false}\n")
    out = uno("run", "--config", str(cfg), "--name", name, "--once")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "via host switch, PCIe, sNIC: ok" in out.stdout
    assert machine_snapshot(name) == EMPTY


def test_run_on_a_running_host_refuses_and_leaves_it_up(tmp_path):
    from testkit.hosts import EMPTY, machine_snapshot

    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text("rundir: /run/uno-test\nvms: 1\noneswitch: {enabled: false}\n")
    try:
        assert uno("up", "--config", str(cfg), "--name", name).returncode == 0
        before = machine_snapshot(name)
        out = uno("run", "--config", str(cfg), "--name", name, "--once")
        assert out.returncode == 2 and "already up" in out.stderr, out.stdout + out.stderr
        assert machine_snapshot(name) == before
        assert uno("status", "--config", str(cfg), "--name", name).returncode == 0
    finally:
        uno("down", "--config", str(cfg), "--name", name)
    assert machine_snapshot(name) == EMPTY


def test_run_until_ctrl_c_then_leaves_nothing(tmp_path):
    """`make run`: up, status, wait; SIGINT (Ctrl-C) tears down."""
    import signal

    from testkit.hosts import EMPTY, machine_snapshot

    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text("rundir: /run/uno-test\nvms: 1\noneswitch: {enabled: false}\n")
    proc = subprocess.Popen([sys.executable, "-m", "uno_cli.main", "run", "--config", str(cfg), "--name", name],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        lines = []
        for line in proc.stdout:  # bounded by the bring-up's own timeouts; EOF if it dies
            lines.append(line)
            if "Ctrl-C" in line:
                break
        assert any("Ctrl-C" in line for line in lines), "".join(lines) + proc.stderr.read()
        assert machine_snapshot(name)["netns"]  # it is really up
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert machine_snapshot(name) == EMPTY
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        uno("down", "--config", str(cfg), "--name", name)
