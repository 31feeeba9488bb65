"""`uno placement solve IN.json | sim SCENARIO | profile`: the placement engine from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from domain.errors import CliError
from placement.model import PlacementInputError, parse_problem
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
        sim.run(args.scenario, Path(args.out), quick=args.quick)
    except PlacementInputError as exc:
        raise CliError(str(exc)) from None
    return 0


def _number(what: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise CliError(f"--measure {what}: expected a number, got {text!r}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise CliError(f"--measure {what}: expected a finite number, got {text!r}")
    return v


def cmd_profile(args: argparse.Namespace) -> int:
    import time

    from placement.profiles import load_profiles, read_profile_file, record_measurement

    try:
        if args.measure:
            if len(args.measure) < 4 or len(args.measure) % 2:
                raise CliError("--measure: expected TYPE ON CORES GBPS [CORES GBPS ...]")
            nf_type, on, *vals = args.measure
            points = [
                (_number("CORES", c), _number("GBPS", g)) for c, g in zip(vals[::2], vals[1::2], strict=True)
            ]
            raw = read_profile_file(args.file) if args.file else {}
            date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            source = args.source or "uno placement profile --measure " + " ".join(args.measure)
            raw = record_measurement(raw, nf_type, on, points, None, date, source)
            if args.file:
                tmp = Path(f"{args.file}.tmp")
                tmp.write_text(json.dumps(raw, indent=2) + "\n")
                tmp.replace(args.file)
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
    f.add_argument("--source", help="provenance: the command that measured it (default: this command)")
    f.set_defaults(func=cmd_profile)
