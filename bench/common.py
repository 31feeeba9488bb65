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
