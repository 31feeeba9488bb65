"""Where a running agent can be found: RUNDIR/NAME/agent/endpoint.json = {"rest": URL, "pid": PID}.

`status_entry(host_rundir)` is what `uno status --json` reports under the key `agent`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from host_datapath.sysutil import pid_alive


def agent_dir(host_rundir: Path) -> Path:
    return Path(host_rundir) / "agent"


def write(host_rundir: Path, rest: str, pid: int) -> Path:
    path = agent_dir(host_rundir) / "endpoint.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"rest": rest, "pid": pid}))
    os.replace(tmp, path)
    return path


def remove(host_rundir: Path) -> None:
    (agent_dir(host_rundir) / "endpoint.json").unlink(missing_ok=True)


def status_entry(host_rundir: Path) -> dict | None:
    """{"rest": URL, "pid": PID, "running": bool, "nfs": {id: location}} of the host's agent, None when no
    agent was started for it. (`nfs` is read from the agent's state file: what runs where.)"""
    try:
        data = json.loads((agent_dir(host_rundir) / "endpoint.json").read_text())
    except (OSError, ValueError):
        return None
    pid = data.get("pid")
    try:
        state = json.loads((agent_dir(host_rundir) / "state.json").read_text())
        nfs = {k: n.get("location") for k, n in state.get("nfs", {}).items()}
    except (OSError, ValueError, AttributeError):
        nfs = {}
    return {
        "rest": data.get("rest"),
        "pid": pid,
        "running": bool(pid) and pid_alive(int(pid)),
        "nfs": nfs,
    }
