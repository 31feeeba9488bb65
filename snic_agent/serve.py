"""Run the sNIC agent: open (adopt what runs), serve its REST API on the management address until SIGTERM or
SIGINT; NFs keep running after it stops (a restarted agent adopts them)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from domain.errors import CliError
from nf_local import jsonlog
from snic_agent.api import create_app
from snic_agent.config import SnicAgentConfig
from snic_agent.service import SnicAgent


def serve(cfg: SnicAgentConfig, log_file: str | None = None) -> int:
    from werkzeug.serving import make_server

    cfg.directory.mkdir(parents=True, exist_ok=True)
    log = cfg.directory / "agent.log" if log_file is None else (log_file if log_file != "-" else None)
    jsonlog.setup(log, ("uno.snic", "werkzeug"))
    agent = SnicAgent(cfg)
    try:
        done = agent.open()
    except Exception as exc:  # noqa: BLE001 - one line for the operator, not a traceback
        raise CliError(f"cannot open the sNIC: {exc}") from None
    stop = threading.Event()
    pidfile = cfg.directory / "agent.pid"
    pidfile.write_text(str(os.getpid()))  # before the port opens: whoever sees it answer finds the pid
    try:
        server = make_server(cfg.listen[0], cfg.listen[1], create_app(agent, cfg.token, stop), threaded=True)
    except (OSError, SystemExit):
        agent.close()
        pidfile.unlink(missing_ok=True)
        raise CliError(f"listen: cannot listen on {cfg.listen[0]}:{cfg.listen[1]}") from None

    def _stop(*_):
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    url = f"http://{cfg.listen[0]}:{server.server_port}"
    print(url, flush=True)
    print(f"uno snic agent: {cfg.snic} serving {url} ({'; '.join(done) or 'no instances'})", file=sys.stderr)
    logging.getLogger("uno.snic").info("started", extra={"fields": {"url": url, "adopted": done}})
    try:
        server.serve_forever()
    finally:
        agent.close()
        pidfile.unlink(missing_ok=True)
    return 0
