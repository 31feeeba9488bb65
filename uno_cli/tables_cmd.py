"""`uno agent tables`: where each of OneSwitch's virtual tables runs (host or an sNIC) and, for a table kept on
the host, why; `--place` places them now, `--pin T LOCATION [--split P]` / `--unpin T` pins one (split at
priority P on an sNIC) (the agent's /v1/tables, docs/rest.md)."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from pathlib import Path

from domain.errors import CliError


def agent_url(args: argparse.Namespace) -> str:
    if args.agent:
        return args.agent.rstrip("/")
    from emulated_host.agent_endpoint import status_entry
    from uno_cli.host_cmd import host_from_args

    entry = status_entry(host_from_args(args).rundir)
    if not entry or not entry.get("running"):
        raise CliError("no running agent for this host (uno agent serve), or give --agent URL")
    return str(entry["rest"]).rstrip("/")


def call_agent(args: argparse.Namespace, method: str, path: str, body: object = None) -> object:
    req = urllib.request.Request(
        agent_url(args) + path, data=None if body is None else json.dumps(body).encode(), method=method
    )
    req.add_header("Content-Type", "application/json")
    if args.token_file:
        try:
            req.add_header("Authorization", "Bearer " + Path(args.token_file).read_text().strip())
        except OSError as exc:
            raise CliError(f"--token-file: {exc}") from None
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        try:
            err = json.loads(exc.read() or b"{}")
        except ValueError:
            err = {}
        fld = f" (field {err['field']})" if err.get("field") else ""
        raise CliError(f"agent {exc.code}: {err.get('error', exc.reason)}{fld}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(f"cannot reach the agent: {exc}") from None


def split_text(split: dict | None) -> str:
    """A split table's column: `>=P host:K snic0:N` (its priority and each side's physical rules), else -."""
    if not split:
        return "-"
    sides = " ".join(f"{k}:{v}" for k, v in split["rules"].items())
    return f">={split['host_min_priority']} {sides}"


def render(rows: list[dict]) -> str:
    """The tables as a text table: TABLE LOCATION RULES SPLIT PIN WHY-ON-HOST."""
    splits = [split_text(r.get("split")) for r in rows]
    w = max([5, *map(len, splits)])
    lines = [f"{'TABLE':>5}  {'LOCATION':<11} {'RULES':>7}  {'SPLIT':<{w}}  {'PIN':<6} WHY ON HOST"]
    for r, sp in zip(rows, splits, strict=True):
        why = r.get("why")
        text = f"{why['reason']}" + (f": {why['detail']}" if why and why.get("detail") else "") if why else ""
        lines.append(f"{r['table']:>5}  {r['location']:<11} {r['rules']:>7}  {sp:<{w}}  "
                     f"{r.get('pin') or '-':<6} {text}")  # fmt: skip
    return "\n".join(lines)


def cmd_tables(args: argparse.Namespace) -> int:
    if args.split is not None and args.pin is None:
        raise CliError("--split needs --pin TABLE SNIC")
    if args.pin is not None:
        table, where = args.pin
        body: dict = {"pin": where} | ({"host_min_priority": args.split} if args.split is not None else {})
        print(json.dumps(call_agent(args, "PUT", f"/v1/tables/{table}", body)))
        return 0
    if args.unpin is not None:
        print(json.dumps(call_agent(args, "PUT", f"/v1/tables/{args.unpin}", {"pin": None})))
        return 0
    if args.place:
        print(json.dumps(call_agent(args, "POST", "/v1/tables/place", {})))
    rows = call_agent(args, "GET", "/v1/tables")
    print(json.dumps(rows) if args.json else render(rows))
    return 0


def add_agent_args(p: argparse.ArgumentParser) -> None:
    """The options that find the running agent (`agent_url`) and its token."""
    p.add_argument("--agent", help="the agent's REST URL (default: the running agent of --config/--name)")
    p.add_argument("--config", help="host config YAML (as for `uno up`)")
    p.add_argument("--name", help="host instance name (overrides the config's)")
    p.add_argument("--token-file", help="file holding the agent's bearer token")


def register(asub: argparse._SubParsersAction) -> None:
    t = asub.add_parser(
        "tables", help="where OneSwitch's tables run (host or sNIC) and why one stays on the host"
    )
    add_agent_args(t)
    g = t.add_mutually_exclusive_group()
    g.add_argument("--place", action="store_true", help="place the tables now (NFs stay), then list them")
    g.add_argument("--pin", nargs=2, metavar=("TABLE", "LOCATION"), help="pin TABLE to host or an sNIC")
    g.add_argument("--unpin", metavar="TABLE", help="let the solver place TABLE again")
    t.add_argument(
        "--split", type=int, metavar="P",
        help="with --pin TABLE SNIC: split the table there (OneSwitch's host_min_priority: the sNIC runs the "
        "whole table, the host its rules of priority >= P for its own packets)",
    )  # fmt: skip
    t.add_argument("--json", action="store_true", help="the agent's JSON rows instead of a text table")
    t.set_defaults(func=cmd_tables)
