"""The `uno` entry point: help, unknown subcommands and operator errors never print a traceback."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_uno(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "uno_cli.main", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_help_lists_subcommands():
    out = run_uno("--help")
    assert out.returncode == 0
    assert "bench" in out.stdout


def test_no_subcommand_prints_help_and_fails():
    out = run_uno()
    assert out.returncode == 2
    assert "usage: uno" in out.stdout


def test_unknown_benchmark_is_a_one_line_error():
    out = run_uno("bench", "no-such-benchmark")
    assert out.returncode == 2
    assert "unknown benchmark 'no-such-benchmark'" in out.stderr
    assert "Traceback" not in out.stderr


def test_bench_without_a_name_names_the_benchmarks():
    out = run_uno("bench")
    assert out.returncode == 2
    assert "which benchmark?" in out.stderr and "oneswitch" in out.stderr
    assert "required: name, rest" not in out.stderr


def test_a_reader_that_leaves_early_gets_no_traceback():
    p = subprocess.Popen([sys.executable, "-m", "uno_cli.main", "bench", "list"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    p.stdout.close()  # as `| head -0`: every write fails with EPIPE
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_root_wrapper_runs_the_cli():
    out = subprocess.run([str(ROOT / "uno"), "--help"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "usage: uno" in out.stdout
