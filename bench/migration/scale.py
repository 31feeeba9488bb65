"""`./uno bench migration` part (d): scale-out/in goodput vs offered rate over time (StatelessNF Figure 9).

The TCP firewall behind one virtual port (testkit.scale_traffic): phases of 64 TCP-like connections at a
rising then falling offered rate, the NF resized 1 -> 2 -> 4 -> 1 by the agent during them; the same
schedule with the state in Redis and with `--store local`, one after the other in the same run. Sampled
every 0.25 s: offered (the VM's tx packets/s) and delivered (the wire's rx packets/s). Plotted to
bench/out/migration/scale.png; figures: lost packets per store, OneSwitch's set time and the agent's
scale call (medians), delivered/offered over the run.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.common import median
from testkit.scale_traffic import Phase, ScaleRun, add_tcp_firewall, run_schedule
from testkit.testbed import Testbed

FULL = [Phase(500, 4, 1), Phase(1000, 4, 2), Phase(2000, 4, 4), Phase(3000, 4, 4), Phase(1500, 4, 2),
        Phase(800, 4, 1)]  # fmt: skip
QUICK = [Phase(500, 2.5, 1), Phase(1000, 2.5, 2), Phase(2000, 2.5, 4), Phase(800, 2.5, 1)]


def _one(store: str, phases: list[Phase], rundir: str) -> ScaleRun:
    with Testbed(rundir=rundir, store=store, drain_s=0.5) as tb:
        add_tcp_firewall(tb, at="host")
        return run_schedule(tb, phases, flows=64)


def _plot(runs: dict[str, ScaleRun], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # a project dependency (pyproject.toml); reported, not fatal
        return None
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 3.2 * len(runs)), sharex=True)
    for ax, (store, run) in zip(axes if len(runs) > 1 else [axes], runs.items(), strict=True):
        t = [s[0] for s in run.samples]
        ax.plot(t, [s[1] for s in run.samples], label="offered (VM tx)", color="tab:gray", linestyle="--")
        ax.plot(t, [s[2] for s in run.samples], label="delivered (wire rx)", color="tab:blue")
        ax.set_ylabel("packets/s")
        ax2 = ax.twinx()
        ax2.step(t, [s[3] for s in run.samples], where="post", color="tab:orange", label="instances")
        ax2.set_ylabel("instances")
        ax2.set_ylim(0, 5)
        for p in run.phases:
            if p.t_resize is not None:
                ax.axvline(p.t_resize, color="tab:orange", alpha=0.3)
        ax.set_title(f"firewall, state: {store} (lost {run.lost} packets)")
        ax.grid(True, alpha=0.3)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    axes_last = axes[-1] if len(runs) > 1 else axes
    axes_last.set_xlabel("seconds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def run_part(quick: bool, rundir: str, out: Path = Path("bench/out/migration")) -> dict:
    """Part (d); prints one line per phase and returns the figures for the final JSON line."""
    phases = QUICK if quick else FULL
    runs = {store: _one(store, phases, rundir) for store in ("redis", "local")}
    for store, run in runs.items():
        for p in run.phases:
            print(f"scale store={store} rate={p.phase.rate:g} instances={p.phase.instances} sent={p.sent} "
                  f"received={p.received} lost={p.lost} scale_ms={_r(p.scale_ms)} set_ms={_r(p.set_ms)}",
                  flush=True)  # fmt: skip
    red = runs["redis"]
    resized = [p for p in red.phases if p.scale_ms is not None]
    busy = [s for s in red.samples if s[1] > 0]
    plot = _plot(runs, out / "scale.png")
    if plot is None:
        print("scale: matplotlib not importable, no plot", flush=True)
    return {
        "scale_schedule": [[p.rate, p.instances] for p in phases],
        "scale_lost": red.lost,
        "scale_sent": sum(p.sent for p in red.phases),
        "scale_lost_local": runs["local"].lost,
        "scale_sent_local": sum(p.sent for p in runs["local"].phases),
        "scale_set_ms": _r(median([p.set_ms for p in resized if p.set_ms is not None])),
        "scale_call_ms": _r(median([p.scale_ms for p in resized])),
        "scale_delivered_ratio": _r(sum(s[2] for s in busy) / max(1e-9, sum(s[1] for s in busy))),
        "scale_plot": os.path.relpath(plot) if plot else None,
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)
