"""`uno snic agent --config FILE`: run the sNIC agent (on the sNIC); `uno snic bundle --out DIR`: what to
copy onto a DPU to run it there."""

from __future__ import annotations

import argparse

from domain.errors import CliError


def cmd_agent(args: argparse.Namespace) -> int:
    from snic_agent.config import load_config
    from snic_agent.serve import serve

    return serve(load_config(args.config), args.log_file)


def cmd_bundle(args: argparse.Namespace) -> int:
    from snic_agent.bundle import write_bundle

    out = write_bundle(args.out, snic=args.snic, listen=args.listen, bridge=args.bridge, arch=args.arch)
    print(out)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snic", help="the sNIC agent: run it on an sNIC, or bundle it for a DPU")
    ssub = p.add_subparsers(dest="snic_command", metavar="SUBCOMMAND")
    a = ssub.add_parser("agent", help="run the sNIC agent (on the sNIC): NF instances over a REST API")
    a.add_argument("--config", required=True, help="the agent's JSON config (docs/snic.md)")
    a.add_argument("--log-file", help="JSON log file (default DIR/agent.log; - = stderr)")
    a.set_defaults(func=cmd_agent)
    b = ssub.add_parser("bundle", help="write a deployment bundle for a DPU (agent, systemd unit, config)")
    b.add_argument("--out", required=True, help="directory to write (must not exist or be empty)")
    b.add_argument("--snic", default="snic0", help="the DPU's location id on its host (default snic0)")
    b.add_argument("--listen", default="192.0.2.2:7700", help="the DPU's management ADDR:PORT")
    b.add_argument("--bridge", default="ovsbr1", help="the DPU's OVS bridge (default ovsbr1)")
    b.add_argument("--arch", default="aarch64", help="the DPU's CPU architecture (default aarch64)")
    b.set_defaults(func=cmd_bundle)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


__all__ = ["CliError", "register"]
