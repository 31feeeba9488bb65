"""The `uno` command line: one entry point, subcommands contributed by each package.

Each module in COMMAND_MODULES exposes ``register(subparsers)``, adding its subcommands with
``set_defaults(func=...)``; ``func(args)`` returns the process exit status.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from domain.errors import CliError

__all__ = ["CliError", "build_parser", "main"]
COMMAND_MODULES: tuple[str, ...] = (
    "uno_cli.host_cmd",
    "uno_cli.bench_cmd",
    "uno_cli.agent_cmd",
    "uno_cli.snic_cmd",
    "uno_cli.placement_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uno",
        description="UNO host agent: network functions on host CPU or SmartNIC behind one OpenFlow switch.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"uno {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `uno ... | head`: the reader left; no traceback, stdout closed quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
