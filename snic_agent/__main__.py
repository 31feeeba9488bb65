"""`python -m snic_agent --config FILE [--log-file F]`: the sNIC agent without the rest of `uno` (a DPU)."""

from __future__ import annotations

import argparse
import sys

from domain.errors import CliError
from snic_agent.config import load_config
from snic_agent.serve import serve


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="uno-snic-agent", description="UNO sNIC agent (runs on the sNIC)")
    p.add_argument("--config", required=True, help="the agent's JSON config")
    p.add_argument("--log-file", help="JSON log file (default DIR/agent.log; - = stderr)")
    args = p.parse_args(argv)
    try:
        return serve(load_config(args.config), args.log_file)
    except CliError as exc:
        print(f"uno-snic-agent: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
