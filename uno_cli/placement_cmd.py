"""`uno placement solve IN.json | sim SCENARIO | profile`: the placement engine from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from domain.errors import CliError
from placement.model import PlacementInputError, parse_problem
from placement.profiles import EMULATED_PROFILES
from placement.solver import Options, load_backends, solve


def cmd_solve(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {args.input}: {exc.strerror}") from None
    load_backends()
    started = time.monotonic()  # the time limit covers the parse too
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{args.input} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    try:
        problem = parse_problem(data)
        out = solve(problem, Options(solver=args.solver, time_limit=args.time_limit, max_moves=args.max_moves,
                                     move_cost=args.move_cost or 0, started=started,
                                     **({} if args.gap_limit is None else {"gap_limit": args.gap_limit})))  # fmt: skip
    except PlacementInputError as exc:
        raise CliError(str(exc)) from None
    print(json.dumps(out, indent=2 if args.pretty else None, sort_keys=False))
    return 0 if out["status"] in ("optimal", "feasible") else 1


def cmd_sim(args: argparse.Namespace) -> int:
    from placement import sim

    try:
        profiles = None if args.profiles == "none" else Path(args.profiles)
        sim.run(args.scenario, Path(args.out), quick=args.quick, profiles=profiles)
    except PlacementInputError as exc:
        raise CliError(str(exc)) from None
    return 0


def _number(what: str, text: str, flag: str = "--measure") -> float:
    try:
        v = float(text)
    except ValueError:
        raise CliError(f"{flag} {what}: expected a number, got {text!r}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise CliError(f"{flag} {what}: expected a finite number, got {text!r}")
    return v


def _commit() -> str:
    """The checkout's commit (short hash, `+dirty` with local changes), or `unknown` outside a git tree."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _latency_record(args: argparse.Namespace, what: str, median: str, p99: str, date: str) -> dict:
    """The provenance of one latency measurement from the CLI's figures and `--details` JSON."""
    from placement.latency_profiles import measurement

    try:
        details = json.loads(args.details) if args.details else {}
    except json.JSONDecodeError as exc:
        raise CliError(f"--details: not JSON: {exc.msg}") from None
    if not isinstance(details, dict) or set(details) - {"packets", "rate_pps", "load1", "path", "base"}:
        raise CliError("--details: expected a JSON object of packets, rate_pps, load1, path, base")
    meta = {"date": date, "command": args.source or f"uno placement profile {what}", "commit": args.commit
            or _commit(), **details}  # fmt: skip
    flag = what.split()[0]
    return measurement(_number("MEDIAN", median, flag), _number("P99", p99, flag), meta)


def _write(path: str, raw: dict) -> None:
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(raw, indent=2) + "\n")
    tmp.replace(path)


def cmd_profile(args: argparse.Namespace) -> int:
    import time

    from placement.latency_profiles import PCIE_KEY, record_nf_latency, record_pcie_latency
    from placement.profiles import load_profiles, read_profile_file, record_measurement, validate_profile

    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        if args.measure_latency or args.measure_pcie:
            if args.measure:
                raise CliError("--measure: give it alone (not with --measure-latency/--measure-pcie)")
            if not args.file:
                raise CliError("--measure-latency/--measure-pcie: give --file (the profile file to update)")
            raw = read_profile_file(args.file)
            if args.measure_latency:
                nf_type, loc, med, p99 = args.measure_latency
                what = "--measure-latency " + " ".join(args.measure_latency)
                raw = record_nf_latency(raw, nf_type, loc, _latency_record(args, what, med, p99, date))
                validate_profile(nf_type, raw[nf_type])
                shown = {nf_type: raw[nf_type]}
            else:
                snic, med, p99 = args.measure_pcie
                what = "--measure-pcie " + " ".join(args.measure_pcie)
                raw = record_pcie_latency(raw, snic, _latency_record(args, what, med, p99, date))
                shown = {PCIE_KEY: raw[PCIE_KEY]}
            _write(args.file, raw)
            print(json.dumps(shown, indent=2))
            return 0
        if args.measure:
            if len(args.measure) < 4 or len(args.measure) % 2:
                raise CliError("--measure: expected TYPE ON CORES GBPS [CORES GBPS ...]")
            nf_type, on, *vals = args.measure
            points = [
                (_number("CORES", c), _number("GBPS", g)) for c, g in zip(vals[::2], vals[1::2], strict=True)
            ]
            raw = read_profile_file(args.file) if args.file else {}
            source = args.source or "uno placement profile --measure " + " ".join(args.measure)
            raw = record_measurement(raw, nf_type, on, points, None, date, source)
            if args.file:
                _write(args.file, raw)
            profiles = {**load_profiles(args.file), nf_type: {**load_profiles(args.file).get(nf_type, {}),
                                                              **raw[nf_type]}}  # fmt: skip
        else:
            profiles = load_profiles(args.file)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    print(json.dumps(profiles, indent=2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("placement", help="solve and simulate NF placement (host vs sNIC)")
    psub = p.add_subparsers(dest="placement_cmd", metavar="SUBCOMMAND", required=True)
    s = psub.add_parser(
        "solve", help="solve a placement instance (JSON of placement/schema/input.schema.json; '-' = stdin)"
    )
    s.add_argument("input")
    s.add_argument("--solver", choices=["cpsat", "mip"], default="cpsat")
    s.add_argument("--time-limit", type=float, default=10.0, help="seconds (default 10)")
    s.add_argument("--max-moves", type=int, default=None, help="at most this many NFs change location")
    s.add_argument("--move-cost", type=float, default=None, help="host-cost units charged per moved NF")
    s.add_argument("--gap-limit", type=float, default=None,
                   help="host cost counts as proven optimal within this relative gap (default 1e-5; 0: exact)")  # fmt: skip
    s.add_argument("--pretty", action="store_true")
    s.set_defaults(func=cmd_solve)
    m = psub.add_parser("sim", help="run a placement scenario, write CSV and PNG plots")
    m.add_argument("scenario", choices=["fig16", "scaling", "drift", "latency"])
    m.add_argument("--out", default="bench/out/placement", help="output directory")
    m.add_argument("--quick", action="store_true")
    m.add_argument(
        "--profiles", default=str(EMULATED_PROFILES),
        help="latency: measured per-packet latencies (NF types, PCIe) replacing the family's placeholders "
        "(default placement/profiles-emulated.json; 'none': placeholders only)",
    )  # fmt: skip
    m.set_defaults(func=cmd_sim)
    f = psub.add_parser(
        "profile", help="show NF profiles; --measure TYPE host|nic CORES GBPS [CORES GBPS ...] updates FILE"
    )
    f.add_argument("--file", help="profiles JSON overlaying the shipped defaults")
    f.add_argument(
        "--measure",
        nargs="+",
        metavar="ARG",
        help="TYPE ON CORES GBPS [CORES GBPS ...]: CORES used while GBPS passed through the NF (load = 2 x "
        "GBPS); ON is host or nic. Two or more rates: base (b_host/b_nic) + slope by least squares",
    )
    g = f.add_mutually_exclusive_group()
    g.add_argument(
        "--measure-latency", nargs=4, metavar=("TYPE", "LOCATION", "MEDIAN", "P99"),
        help="record TYPE's per-packet latency (us) at LOCATION (host or an sNIC id) into --file: its "
        "latency_us (medians) and latency_p99_us (nic: the largest sNIC), provenance with date and commit",
    )  # fmt: skip
    g.add_argument(
        "--measure-pcie", nargs=3, metavar=("SNIC", "MEDIAN", "P99"),
        help="record one crossing of SNIC's PCIe link (us) into --file (its reserved `pcie` key)",
    )  # fmt: skip
    f.add_argument(
        "--details", help="latency provenance, JSON: packets, rate_pps, load1, path, base ({median, p99})"
    )
    f.add_argument("--commit", help="latency provenance: the commit measured (default: this checkout's)")
    f.add_argument("--source", help="provenance: the command that measured it (default: this command)")
    f.set_defaults(func=cmd_profile)
