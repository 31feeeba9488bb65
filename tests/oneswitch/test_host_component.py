"""`uno up / status / down / run` with OneSwitch, as an operator runs them: it starts with the host, every
switch connected, reported in `status --json`; a crashed OneSwitch makes the host not up, and `down` still
removes everything; `uno run --once` (the demo chain, tests/demo) pings VM -> outside through the chain's rules,
installed on OneSwitch by the os-ken controller it connects to."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from emulated_host import naming as nm
from host_datapath.oneswitch_client import OneSwitchClient
from host_datapath.sysutil import wait_for
from testkit.hosts import EMPTY, machine_snapshot, unique_name

from .conftest import ONESWITCH

pytestmark = ONESWITCH
REPO = Path(__file__).resolve().parents[2]


def uno(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "uno_cli.main", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_up_status_crash_and_down(tmp_path):
    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text(
        # no supervisor: this test is of a crashed OneSwitch staying dead (tests/oneswitch/test_supervise.py has
        # the supervised restart)
        "rundir: /run/uno-test\nvms: 1\nsnics:\n  - pcie_gbps: 0\noneswitch:\n  token: s3cret-t0ken\n  supervise: false\n"
    )
    try:
        up = uno("up", "--config", str(cfg), "--name", name)
        assert up.returncode == 0, up.stderr
        st = uno("status", "--config", str(cfg), "--name", name, "--json")
        assert st.returncode == 0, st.stderr
        o = json.loads(st.stdout)["oneswitch"]
        assert o["running"] and o["pid"] and o["dpid"] == nm.dpid(name)
        assert o["listen"].startswith("tcp:127.0.0.1:") and o["rest"].startswith("http://127.0.0.1:")
        assert {(p["vport"], p["switch"], p["port"]) for p in o["ports"]} == {
            (1, "snic0", 1),
            (100, "host", 100),
        }
        assert o["switches"] == {"host": "connected", "snic0": "connected"}
        # The token is required by the REST API, and not printed in the status.
        assert "s3cret-t0ken" not in st.stdout
        from host_datapath.oneswitch_client import OneSwitchError

        try:
            OneSwitchClient(o["rest"]).ports()
            raise AssertionError("REST answered without the token")
        except OneSwitchError as exc:
            assert exc.status == 401, exc
        assert len(OneSwitchClient(o["rest"], token="s3cret-t0ken").ports()) == 2
        show = subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "show", o["listen"]], capture_output=True, text=True
        )
        assert show.returncode == 0 and "100(" in show.stdout, show.stderr
        # A crashed OneSwitch: the host is not up any more; `down` removes everything all the same.
        os.kill(o["pid"], signal.SIGKILL)
        wait_for(
            lambda: uno("status", "--config", str(cfg), "--name", name).returncode == 1, 30, "status: not up"
        )
        assert (
            json.loads(uno("status", "--config", str(cfg), "--name", name, "--json").stdout)["oneswitch"][
                "running"
            ]
            is False
        )
    finally:
        down = uno("down", "--config", str(cfg), "--name", name)
    assert down.returncode == 0, down.stderr
    assert machine_snapshot(name) == EMPTY
