"""`uno bench NAME [--quick]`: run the benchmark kept in bench/NAME/ (its run.py)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from domain.errors import CliError

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO_ROOT / "bench"


def available() -> list[str]:
    return sorted(p.parent.name for p in BENCH_DIR.glob("*/run.py"))


def run(args: argparse.Namespace) -> int:
    names = available()
    if args.name is None:
        raise CliError(
            f"which benchmark? `uno bench NAME [--quick]`, NAME one of: {', '.join(names) or 'none'}"
        )
    if args.name == "list":
        print("\n".join(names))
        return 0
    if args.name not in names:
        raise CliError(f"unknown benchmark '{args.name}' (available: {', '.join(names) or 'none'})")
    cmd = [
        sys.executable,
        str(BENCH_DIR / args.name / "run.py"),
        *(["--quick"] if args.quick else []),
        *args.rest,
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.call(cmd, cwd=REPO_ROOT, env=env)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run a benchmark (ends with one JSON line of its figures)")
    # optional here so that a bare `uno bench` lists the names instead of argparse's "required: name, rest"
    p.add_argument("name", nargs="?", help="benchmark name (a folder of bench/), or 'list'")
    p.add_argument("--quick", action="store_true", help="a short run of about a minute")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="further arguments passed to the benchmark")
    p.set_defaults(func=run)
