"""`uno up | status | down` with `redis.mode: cluster` as an operator runs them (root; real processes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from host_datapath.sysutil import pid_alive
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name

REPO = Path(__file__).resolve().parents[2]


def _uno(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "uno_cli.main", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


@needs_root
def test_cli_cluster_up_status_json_down(tmp_path):
    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text(
        f"name: {name}\nrundir: /run/uno-test\nvms: 0\noneswitch: {{enabled: false}}\n"
        "redis: {mode: cluster, masters: 3, replicas: 1}\n"
    )
    pids: list[int] = []
    try:
        up = _uno("up", "--config", str(cfg), "--json")
        assert up.returncode == 0, up.stderr
        st = json.loads(_uno("status", "--config", str(cfg), "--json").stdout)
        r = st["redis"]
        assert st["up"] and r["mode"] == "cluster"
        assert sorted(n["role"] for n in r["nodes"]) == ["master"] * 3 + ["replica"] * 3
        assert all(n["address"].count(":") == 1 for n in r["nodes"])
        pids = [n["pid"] for n in r["nodes"]]
        text = _uno("status", "--config", str(cfg)).stdout
        assert "redis   cluster redis-cluster://" in text and "replica" in text
    finally:
        down = _uno("down", "--config", str(cfg))
    assert down.returncode == 0, down.stderr
    assert machine_snapshot(name) == EMPTY
    assert pids and not [p for p in pids if pid_alive(p)]
