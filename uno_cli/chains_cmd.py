"""`uno agent chains`: the agent's serial NF chains with their predicted per-packet latency under the current
placement, their SLO and PCIe crossings (the agent's GET /v1/chains, docs/rest.md)."""

from __future__ import annotations

import argparse
import json

from uno_cli.tables_cmd import add_agent_args, call_agent


def render(rows: list[dict]) -> str:
    """The chains as a text table: CHAIN PATH (vertex@location ...) PREDICTED SLO CROSSINGS."""
    lines = [f"{'CHAIN':<16} {'PREDICTED_US':>12} {'SLO_US':>9} {'PCIE':>4}  PATH"]
    for r in rows:
        path = " -> ".join(f"{v}@{loc}" for v, loc in zip(r["vertices"], r["locations"], strict=True))
        slo = "-" if r["slo_us"] is None else f"{r['slo_us']:g}"
        late = "  OVER SLO" if r.get("within_slo") is False else ""
        lines.append(f"{r['id']:<16} {r['predicted_latency_us']:>12.1f} {slo:>9} {r['pcie_crossings']:>4}  "
                     f"{path}{late}")  # fmt: skip
    return "\n".join(lines)


def cmd_chains(args: argparse.Namespace) -> int:
    rows = call_agent(args, "GET", "/v1/chains")
    print(json.dumps(rows) if args.json else render(rows))
    return 0


def register(asub: argparse._SubParsersAction) -> None:
    c = asub.add_parser(
        "chains", help="NF chains with their predicted per-packet latency (us), SLO and PCIe crossings"
    )
    add_agent_args(c)
    c.add_argument("--json", action="store_true", help="the agent's JSON rows instead of a text table")
    c.set_defaults(func=cmd_chains)
