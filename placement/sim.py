"""Placement scenarios with CSV + PNG output (`uno placement sim fig16|scaling|drift`).

- fig16: UNO Fig. 16 — 9 VMs, 18 DPI NFs (two per VM-to-VM chain), sNIC capacity 36, PCIe budget (shared,
  as in the paper) swept 10..100 Gbit/s: host cores, sNIC cores, PCIe use.
- scaling: solve time vs vertex count, CP-SAT (ours) vs OR-Tools MIP (SCIP), same instances.
- drift: traffic drifting over time; re-placement with vs without hysteresis/dampening: cost and moves.
"""

from __future__ import annotations

import contextlib
import csv
import random
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from placement.families import build as build_family
from placement.generate import chains_instance
from placement.hysteresis import Dampener
from placement.model import PlacementInputError, parse_problem
from placement.profiles import load_profiles, node_costs
from placement.solver import solve


@contextlib.contextmanager
def progress(total: int, what: str) -> Iterator[Callable[[str], None]]:
    """A progress bar of `total` steps on stderr while stderr is a terminal, nothing when it is piped or a
    log; yields `step(label)`, called once per step done."""
    console = Console(stderr=True)
    columns = (TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task(what, total=total)
        yield lambda label: bar.update(task, advance=1, description=label)


def fig16_instance(pcie: float, gbps: float = 2.25) -> dict:
    dpi = load_profiles()["dpi"]
    nodes = [{"id": f"vm{i}", "kind": "vm"} for i in range(9)]
    nodes.append({"id": "eth0", "kind": "port", "pinned": "snic0"})
    edges = []
    for i in range(9):
        a, b = f"dpi{2 * i}", f"dpi{2 * i + 1}"
        nodes += [{"id": x, "kind": "nf", **node_costs(dpi)} for x in (a, b)]
        edges += [
            {"src": f"vm{i}", "dst": a, "gbps": gbps},
            {"src": a, "dst": b, "gbps": gbps},
            {"src": b, "dst": f"vm{(i + 1) % 9}", "gbps": gbps},
        ]
    return {"nodes": nodes, "edges": edges, "snics": [{"id": "snic0", "capacity": 36, "pcie_gbps": pcie}],
            "pcie_model": "shared"}  # fmt: skip


def _plot(path: Path, x, series: dict, xlabel: str, ylabel: str, title: str, logy: bool = False) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, ys in series.items():
        ax.plot(x, ys, marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def run_fig16(out: Path, quick: bool) -> list[list]:
    rows = []
    budgets = list(range(10, 101, 10))
    with progress(len(budgets), "fig16") as step:
        for pcie in budgets:
            r = solve(parse_problem(fig16_instance(pcie)), solver="cpsat", time_limit=30)
            rows.append([pcie, r["status"], round(r["host_cost"], 3), round(r["snic_load"]["snic0"], 3),
                         round(r["pcie_gbps"]["snic0"]["up"] + r["pcie_gbps"]["snic0"]["down"], 3)])  # fmt: skip
            step(f"fig16 pcie={pcie}")
    _write_csv(
        out / "fig16.csv", ["pcie_budget_gbps", "status", "host_cores", "snic_cores", "pcie_gbps"], rows
    )
    x = [r[0] for r in rows]
    _plot(out / "fig16.png", x, {"host cores": [r[2] for r in rows], "sNIC cores": [r[3] for r in rows],
                                 "PCIe Gbit/s": [r[4] for r in rows]},
          "PCIe budget (Gbit/s)", "cores / Gbit/s", "DPI placement (UNO Fig. 16 setting)")  # fmt: skip
    return rows


def run_scaling(
    out: Path, quick: bool, sizes: list[int] | None = None, seeds: int | None = None
) -> list[list]:
    sizes = sizes or ([100, 500] if quick else [100, 500, 1000, 2000, 5000])
    seeds = seeds or (1 if quick else 3)
    limit = 20 if quick else 60
    rows = []
    for name in ("cpsat", "mip"):  # warm-up: library imports and first-call set-up are not solve time
        solve(parse_problem(chains_instance(30, seed=99)), solver=name, time_limit=limit)
    with progress(len(sizes) * seeds * 2, "scaling") as step:
        for n in sizes:
            for seed in range(seeds):
                problem = parse_problem(chains_instance(n, seed=seed))
                for name in ("cpsat", "mip"):
                    r = solve(problem, solver=name, time_limit=limit)
                    tiebreak = r.get("tiebreak", "")
                    rows.append(
                        [n, seed, name, r["status"], r["solve_seconds"], r.get("host_cost"), tiebreak]
                    )
                    step(f"scaling n={n} {name}")
    _write_csv(
        out / "scaling.csv",
        ["vertices", "seed", "solver", "status", "seconds", "host_cost", "tiebreak"],
        rows,
    )

    def med(name: str, n: int) -> float:
        ts = sorted(r[4] for r in rows if r[0] == n and r[2] == name)
        return ts[len(ts) // 2]

    _plot(out / "scaling.png", sizes, {"ours (engine + CP-SAT)": [med("cpsat", n) for n in sizes],
                                       "MIP (SCIP)": [med("mip", n) for n in sizes]},
          "vertices", "solve time (s, median)", "Placement solve time", logy=True)  # fmt: skip
    return rows


def run_drift(out: Path, quick: bool) -> list[list]:
    """Traffic drifts every step; 'eager' adopts every new optimum, 'dampened' goes through the Dampener
    (hysteresis 3 %, dampening window 3 steps, anti-flap 6 steps; a placement that violates a budget is
    always left). Both re-solve incrementally from their own current placement (tie-break: fewer moves)."""
    from placement.evaluate import evaluate

    steps = 8 if quick else 24
    base = chains_instance(120, seed=7)
    rng = random.Random(3)
    rows = []
    current: dict[str, dict | None] = {"dampened": None, "eager": None}
    damp = Dampener(rel_threshold=0.03, window=3.0, flap_window=6.0)
    moves_total = {"dampened": 0, "eager": 0}
    with progress(steps, "drift") as step:
        for t in range(steps):
            for e in base["edges"]:
                e["gbps"] = round(max(0.05, e["gbps"] * rng.uniform(0.7, 1.35)), 2)
            for mode in ("dampened", "eager"):
                inst = {
                    **base,
                    "nodes": [dict(n, location=(current[mode] or {}).get(n["id"])) for n in base["nodes"]],
                }
                problem = parse_problem(inst)
                r = solve(problem, solver="cpsat", time_limit=20)
                if r["status"] not in ("optimal", "feasible"):
                    raise PlacementInputError(f"drift step {t}: {r.get('reason')}")
                go = True
                if mode == "dampened" and current[mode] is not None:
                    ev = evaluate(problem, current[mode])
                    go, _ = damp.decide(t, current[mode], float(ev.host_cost), r["placement"], r["host_cost"],
                                        current_feasible=ev.feasible)  # fmt: skip
                    if go:
                        damp.record(t, current[mode])
                moved = len(r["moves"]) if go else 0
                if go:
                    current[mode] = r["placement"]
                moves_total[mode] += moved
                ev = evaluate(problem, current[mode])
                rows.append([t, mode, round(float(ev.host_cost), 3), moved, moves_total[mode], ev.feasible])
            step(f"drift step {t}")
    _write_csv(out / "drift.csv", ["step", "mode", "host_cost", "moves", "moves_total", "feasible"], rows)
    _plot_drift(out / "drift.png", rows, steps)
    return rows


def _plot_drift(path: Path, rows: list[list], steps: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 6), sharex=True)
    for mode in ("eager", "dampened"):
        rs = [r for r in rows if r[1] == mode]
        top.plot([r[0] for r in rs], [r[2] for r in rs], marker="o", label=mode)
        bottom.plot([r[0] for r in rs], [r[4] for r in rs], marker="o", label=mode)
    top.set_ylabel("host cost (cores)")
    top.set_title("Re-placement under traffic drift")
    bottom.set_ylabel("NFs moved (cumulative)")
    bottom.set_xlabel("step")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def measured_latencies(path: Path | None) -> tuple[dict[str, tuple[float, float]], float | None]:
    """NF type -> (host, nic) median us and the largest measured PCIe crossing (us) of a profile file with
    measured latencies (placement/latency_profiles.py), in whole microseconds (far below their noise; finer
    decimals beside the family's float amounts grow the solver's exact common denominators past 64 bits);
    ({}, None) without a file or measurements."""
    from placement.latency_profiles import PCIE_KEY
    from placement.profiles import read_profile_file

    if path is None:
        return {}, None
    if not Path(path).is_file():  # a mistyped name must not silently mean the placeholders
        raise PlacementInputError(f"profiles: no such file: {path}")
    raw = read_profile_file(path)
    lat = {t: (round(p["latency_us"]["host"]), round(p["latency_us"]["nic"])) for t, p in raw.items()
           if not t.startswith("_") and t != PCIE_KEY and {"host", "nic"} <= set(p.get("latency_us", {}))}  # fmt: skip
    links = [round(v["latency_us"]) for v in raw.get(PCIE_KEY, {}).values()]
    return lat, max(links, default=None)


def run_latency(out: Path, quick: bool, profiles: Path | None = None) -> list[list]:
    """Host cost vs SLO tightness: the `latency` family's instance with every chain's latency_us set at a
    share `slack` of the way from its all-host latency (0: only the all-host placement of its NFs meets
    it, apart from pins) to its all-sNIC one (1: no SLO binds) - CSV + PNG. `profiles`: a profile file with
    measured latencies (`./uno bench latency --profile`): its NF types' medians replace the family's
    placeholders for those types, its PCIe crossing every sNIC's."""
    from placement.families import family, set_slo

    lat, pcie_us = measured_latencies(profiles)
    source = f"measured: {', '.join(sorted(lat))}" + (f"; PCIe {pcie_us:g} us" if pcie_us is not None else "")
    print(f"latency: NF latencies {source if lat or pcie_us is not None else 'placeholders (none measured)'}")
    n, seeds = (150, 1) if quick else (500, 3)
    slacks = [0.0, 0.25, 0.5, 0.75, 1.0] if quick else [i / 10 for i in range(11)]
    rows = []
    with progress(len(slacks) * seeds, "latency") as step:
        for seed in range(seeds):
            base = build_family(family("latency"), n, seed, latency=lat, pcie_us=pcie_us)
            for slack in slacks:
                obj = set_slo(base, slack)
                r = solve(parse_problem(obj), time_limit=30)
                lat = r.get("chain_latency_us", {})
                rows.append([seed, slack, r["status"], round(r.get("host_cost", float("nan")), 4),
                             round(sum(r.get("snic_load", {}).values()), 4),
                             round(max(lat.values(), default=0.0), 3), r["solve_seconds"]])  # fmt: skip
                step(f"latency slack={slack}")
    _write_csv(out / "latency.csv", ["seed", "slo_slack", "status", "host_cores", "snic_units",
                                     "max_chain_latency_us", "solve_s"], rows)  # fmt: skip
    series = {f"host cores (seed {s})": [r[3] for r in rows if r[0] == s] for s in range(seeds)}
    _plot(out / "latency.png", slacks, series, "SLO slack (0 = all-host latency, 1 = all-sNIC latency)",
          "host cores", "Host cost vs chain latency SLO tightness")  # fmt: skip
    return rows


SCENARIOS = {"fig16": run_fig16, "scaling": run_scaling, "drift": run_drift, "latency": run_latency}


def run(scenario: str, out: Path, quick: bool = False, profiles: Path | None = None) -> list[list]:
    """Run `scenario`; `profiles` (measured latencies) is read by `latency` only."""
    if scenario not in SCENARIOS:
        raise PlacementInputError(f"scenario: {scenario!r} is not one of {', '.join(SCENARIOS)}")
    out.mkdir(parents=True, exist_ok=True)
    rows = (
        SCENARIOS[scenario](out, quick, profiles)
        if scenario == "latency"
        else SCENARIOS[scenario](out, quick)
    )
    print(f"{scenario}: wrote {out / (scenario + '.csv')} and {out / (scenario + '.png')}")
    return rows
