"""Shared benchmark helpers: machine description, medians, the final JSON line."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from pathlib import Path


def machine() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load1": round(os.getloadavg()[0], 2),
        "commit": commit or "?",
    }


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def print_machine() -> None:
    m = machine()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in m.items()), flush=True)


def final_json(figures: dict) -> None:
    """The last line of every benchmark's output: one JSON object of its figures."""
    print(json.dumps(figures, sort_keys=True), flush=True)


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds of the processes and all their descendants (socat forks a child per connection), with the
    time of children they already reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    stat: dict[int, list[str]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(d.name)], stat[int(d.name)] = int(fields[1]), fields
    want = {p for p in roots if p in stat}
    grew = True
    while grew:
        new = {p for p, pp in parent.items() if pp in want and p not in want}
        want |= new
        grew = bool(new)
    return sum(sum(int(stat[p][i]) for i in (11, 12, 13, 14)) for p in want) / tick


def thread_cpu_seconds(pid: int, name: str) -> float:
    """CPU seconds of the threads of process `pid` named `name` (their `comm`); 0 if gone. From `schedstat` (ns
    on the CPU) where the kernel has it: `stat`'s utime + stime count 10 ms ticks, too coarse for one run of
    a few thousand rules at a few us each; else from those ticks."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            if (task / "comm").read_text().strip() != name:
                continue
            try:
                total += int((task / "schedstat").read_text().split()[0]) / 1e9
            except FileNotFoundError:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return total
