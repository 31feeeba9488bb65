"""`uno agent serve`: run the NF agent against a running emulated host (`uno up`)."""

from __future__ import annotations

import argparse
import faulthandler
import ipaddress
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from domain.errors import CliError
from nf_local.versions import DEFAULT_DIR as VERSIONS_DIR


def _listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        ipaddress.ip_address(host)
        p = int(port)
    except ValueError:
        raise CliError(f"--listen: {text!r} is not IP:PORT") from None
    if not 0 <= p <= 65535:
        raise CliError(f"--listen: port {p} out of range")
    family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    with socket.socket(family) as probe:  # before anything starts: a port in use changes nothing
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, p))
        except OSError as exc:
            raise CliError(f"--listen: cannot listen on {text}: {exc.strerror or exc}") from None
    return host, p


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        try:
            tok = Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise CliError(f"--token-file: {exc}") from None
        if len(tok) < 8:
            raise CliError("--token-file: token must be at least 8 characters")
        return tok
    return None


class Loops:
    """Monitoring (sample + supervise + autoscale + balance every `sample_s`) and re-placement (every `replace_s`) in one
    thread."""

    def __init__(
        self, agent, sample_s: float, replace_s: float, host_gone=None, on_host_gone=None, place_tables=False
    ):
        self.agent, self.sample_s, self.replace_s = agent, sample_s, replace_s
        self.place_tables = place_tables  # switching offload: place OneSwitch's tables after the NFs
        self.host_gone, self.on_host_gone = host_gone, on_host_gone
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="agent-loops", daemon=True)

    def _place_tables(self, log: logging.Logger) -> None:
        from domain.errors import NotSupported

        try:
            self.agent.place_tables()
        except NotSupported as exc:  # an older OneSwitch: said once, not every period
            log.warning("switching offload off", extra={"fields": {"error": str(exc)}})
            self.place_tables = False

    def _run(self) -> None:

        log = logging.getLogger("uno.agent")
        next_replace = time.monotonic() + self.replace_s
        while not self.stop.wait(self.sample_s):
            if self.host_gone and self.host_gone():
                log.info("host is down: agent stops")
                self.on_host_gone()
                return
            try:
                self.agent.sample()
                self.agent.supervise()
                self.agent.autoscale()
                self.agent.balance()
                if self.replace_s > 0 and time.monotonic() >= next_replace:
                    next_replace = time.monotonic() + self.replace_s
                    self.agent.run_placement()
                    if self.place_tables:
                        self._place_tables(log)
            except Exception as exc:  # noqa: BLE001 - the loop must survive one bad round
                log.exception("loop round failed", extra={"fields": {"error": str(exc)}})


def cmd_serve(args: argparse.Namespace) -> int:
    from werkzeug.serving import make_server

    from domain.errors import OperationFailed, StartError
    from emulated_host import agent_endpoint
    from emulated_host.host import EmulatedHost
    from nf_agent.api import create_app
    from nf_agent.graph import SnicInfo
    from nf_agent.service import Agent, AgentConfig
    from nf_local import jsonlog
    from nf_local.command import parse_cpu_latency
    from nf_runtime.portmap import OneSwitchPortMapper
    from nf_runtime.runtime import HostRuntime
    from placement.hysteresis import Dampener
    from placement.latency_profiles import pcie_latency, with_latency_stat
    from placement.model import PlacementInputError
    from placement.profiles import load_pcie_section, load_profiles
    from uno_cli.host_cmd import host_from_args

    addr, port = _listen(args.listen)
    token = _token(args)
    if not ipaddress.ip_address(addr).is_loopback and token is None:
        raise CliError("--listen: a non-loopback address needs --token-file (the API would be open)")
    if not (math.isfinite(args.sample_interval) and args.sample_interval > 0):
        raise CliError("--sample-interval must be > 0 seconds")
    if args.max_moves is not None and args.max_moves < 0:
        raise CliError("--max-moves must be >= 0")
    for opt, value, hi in (
        ("--replace-interval", args.replace_interval, math.inf),
        ("--threshold", args.threshold, math.inf),
        ("--rel-threshold", args.rel_threshold, 1),
        ("--dampening", args.dampening, math.inf),
        ("--flap-window", args.flap_window, math.inf),
        ("--drain", args.drain, 60),
    ):
        if not (math.isfinite(value) and 0 <= value <= hi):  # NaN and inf fail too
            raise CliError(f"{opt} must be in [0, {hi:g}], got {value:g}")
    if not (math.isfinite(args.solve_time_limit) and args.solve_time_limit > 0):
        raise CliError("--solve-time-limit must be > 0 seconds")
    if not 0 <= args.warm_slots <= 8:
        raise CliError("--warm-slots must be in [0, 8]")
    try:
        args.cpu_latency_us = parse_cpu_latency(args.cpu_latency_us)
    except ValueError as exc:
        raise CliError(f"--cpu-latency-us {exc}") from None
    if args.failover_interval != 0 and not 10 <= args.failover_interval <= 10_000:
        raise CliError("--failover-interval must be 0 (off) or in [10, 10000] ms")
    if args.snic_heartbeat_ms != 0 and not 1 <= args.snic_heartbeat_ms <= 10_000:
        raise CliError("--snic-heartbeat-ms must be 0 (off) or in [1, 10000]")
    if not args.snic_heartbeat_ms <= args.snic_timeout_ms <= 60_000:
        raise CliError("--snic-timeout-ms must be in [--snic-heartbeat-ms, 60000]")
    if not 0 <= args.snic_confirm_ms <= 60_000:
        raise CliError("--snic-confirm-ms must be in [0, 60000]")
    try:
        profiles = with_latency_stat(load_profiles(args.profiles), args.latency_stat)
        links = load_pcie_section(args.profiles)
    except PlacementInputError as exc:
        raise CliError(str(exc)) from None
    host: EmulatedHost = host_from_args(args)
    if not host.is_up():
        raise CliError(f"emulated host '{host.name}' is not up (run `uno up` first)")
    ones = host.oneswitch()
    if ones is None:
        raise CliError("the agent maps NF ports in OneSwitch: enable it (config key oneswitch.enabled)")
    adir = agent_endpoint.agent_dir(host.rundir)
    adir.mkdir(parents=True, exist_ok=True)
    running = agent_endpoint.status_entry(host.rundir)
    if running and running["running"]:
        raise CliError(f"an agent already runs for '{host.name}' (pid {running['pid']}, {running['rest']})")
    jsonlog.setup(
        adir / "agent.log" if args.log_file is None else (args.log_file if args.log_file != "-" else None)
    )
    status = host.status()
    redis = status["redis"]
    try:
        runtime = HostRuntime(
            host,
            adir,
            redis["port"],
            warm_slots=args.warm_slots,
            redis_socket=redis.get("unix_socket"),
            cpu_latency_us=args.cpu_latency_us,
            tier=host.tier(),
        )
    except StartError as exc:
        raise CliError(str(exc)) from None
    # each sNIC's PCIe crossing latency from the profiles' measured links (0 when none was measured)
    crossing = pcie_latency(links, [s.id for s in host.config.snics], args.latency_stat)
    snics = [
        SnicInfo(
            s.id,
            float(s.capacity),
            float(s.pcie_gbps) if s.pcie_gbps > 0 else 1e4,
            s.eth_ports,
            s.max_rules,
            crossing.get(s.id, 0.0),
        )  # fmt: skip
        for s in host.config.snics
        if s.id in runtime.locations()
    ]
    cfg = AgentConfig(
        snics=snics,
        vm_slots=host.config.vms,
        profiles=profiles,
        dampener=Dampener(
            threshold=args.threshold,
            rel_threshold=args.rel_threshold,
            window=args.dampening,
            flap_window=args.flap_window,
        ),
        solve_time_limit=args.solve_time_limit,
        max_moves=args.max_moves,
        failover=args.failover_interval > 0,
    )
    try:
        runtime.open()
        agent = Agent(
            cfg,
            runtime,
            OneSwitchPortMapper(ones.client(), ones.cfg.oneswitch.port_names.nf_name),
            adir / "state.json",
            drain_s=args.drain,
            nf_versions=Path(args.nf_versions),
            tables=ones.client(),
        )
        actions = agent.reconcile()
    except (StartError, OperationFailed, ValueError) as exc:
        runtime.close()
        raise CliError(str(exc)) from None
    app = create_app(agent, token)
    try:
        server = make_server(addr, port, app, threaded=True)
    except (OSError, SystemExit):  # taken since the probe (werkzeug exits on EADDRINUSE): undo the slots
        runtime.close()
        raise CliError(f"--listen: cannot listen on {addr}:{port}") from None
    url = f"http://{addr}:{server.server_port}"
    agent_endpoint.write(host.rundir, url, os.getpid())
    print(url, flush=True)
    print(
        f"uno agent: serving {url} for host '{host.name}' ({len(agent.state.nfs)} NFs; {actions})",
        file=sys.stderr,
    )
    links = ", ".join(f"{s.id} {s.pcie_latency_us:g} us" for s in snics)
    print(f"uno agent: PCIe crossing latency ({args.latency_stat}, from --profiles): {links or 'no sNIC'}"
          + ("" if crossing else " (none measured: 0)"), file=sys.stderr)  # fmt: skip

    def _stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    # `uno down` stops the agent first (SIGTERM); a host removed otherwise (its rundir gone): it stops by itself.
    loops = Loops(
        agent,
        args.sample_interval,
        args.replace_interval,
        lambda: not adir.exists(),
        _stop,
        args.offload_tables,
    )
    loops.thread.start()
    watchdog = None
    if args.snic_heartbeat_ms > 0:  # an NF's exit on an sNIC comes with its heartbeat
        runtime.watch_snics(agent.snic_dead, agent.snic_back,
                            lambda _sid, inst_id: agent.instance_failed(inst_id, "dead"),
                            args.snic_heartbeat_ms, args.snic_timeout_ms, args.snic_confirm_ms)  # fmt: skip
    if args.failover_interval > 0:
        from migration.failover import DetectorConfig, Watchdog

        watchdog = Watchdog(
            agent.probe,
            agent.instance_failed,
            DetectorConfig(interval_s=args.failover_interval / 1000),
            pids=agent.instance_pids,
        )
        watchdog.start()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID`: every thread's stack on stderr
    try:
        server.serve_forever()
    finally:
        if watchdog:
            watchdog.stop()
        loops.stop.set()
        loops.thread.join(timeout=10)
        agent_endpoint.remove(host.rundir)
        runtime.close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agent", help="the NF agent (REST API, NF lifecycle, monitoring, re-placement)")
    asub = p.add_subparsers(dest="agent_command", metavar="SUBCOMMAND")
    s = asub.add_parser("serve", help="serve the agent's REST API for a running emulated host")
    s.add_argument("--config", help="host config YAML (as for `uno up`)")
    s.add_argument("--name", help="host instance name (overrides the config's)")
    s.add_argument("--listen", default="127.0.0.1:0", help="IP:PORT (default loopback, free port)")
    s.add_argument("--token-file", help="file holding the bearer token the API requires")
    s.add_argument("--profiles", help="NF profiles JSON overriding placement/profiles.json")
    s.add_argument(
        "--latency-stat", choices=["median", "p99"], default="median",
        help="which measured per-packet latency of the profiles (NF types' latency_us, the sNICs' PCIe "
        "crossings) chain SLOs are checked against: median (default) or p99 (each part's 99th percentile)",
    )  # fmt: skip
    s.add_argument("--sample-interval", type=float, default=1.0, help="monitoring period, s (default 1)")
    s.add_argument(
        "--replace-interval", type=float, default=30.0, help="re-placement period, s; 0 = on demand only"
    )
    s.add_argument("--threshold", type=float, default=0.0, help="hysteresis: minimum saving, host cores")
    s.add_argument("--rel-threshold", type=float, default=0.05, help="hysteresis: minimum relative saving")
    s.add_argument("--dampening", type=float, default=30.0, help="seconds between migrations")
    s.add_argument(
        "--flap-window",
        type=float,
        default=300.0,
        help="seconds before returning to a placement left (anti-flap)",
    )
    s.add_argument(
        "--max-moves", type=int, default=None, help="incremental re-placement: at most N NFs move per run"
    )
    s.add_argument(
        "--drain",
        type=float,
        default=0.5,
        help="migration: drain bound, s (old NF stopped once quiet or then)",
    )
    s.add_argument(
        "--failover-interval", type=float, default=50,
        help="failover watchdog probe period, ms (default 50): a stuck NF (no /health answer) is replaced by a "
        "new instance and its port remapped; a dead one at once (its exit is seen, not polled); 0 = off: a "
        "dead NF is restarted in place",
    )  # fmt: skip
    s.add_argument(
        "--snic-heartbeat-ms", type=int, default=10,
        help="each sNIC agent's heartbeat period, ms (default 10); 0 = do not watch the sNICs",
    )  # fmt: skip
    s.add_argument(
        "--snic-timeout-ms", type=int, default=40,
        help="no heartbeat for this long (ms, default 40) and the sNIC's switch not answering either: the "
        "sNIC is dead, its NFs fail over to the host",
    )  # fmt: skip
    s.add_argument(
        "--snic-confirm-ms", type=int, default=300,
        help="a switch that refuses or closes the probe is dead at once; one that is only silent (a loaded "
        "machine) is dead once the silence has lasted this long (ms, default 300)",
    )  # fmt: skip
    s.add_argument(
        "--warm-slots", type=int, default=1,
        help="pre-created NF slots (namespace, bridge port) kept free per location (host and each "
        "sNIC), taken by new instances so only the NF process starts; 0 = off (default 1)",
    )  # fmt: skip
    s.add_argument(
        "--cpu-latency-us", default="0",
        help="every NF holds this CPU wake-up latency bound while it runs (Linux PM QoS, /dev/cpu_dma_latency): "
        "0 (default) = idle CPUs poll instead of halting, so the NF and Redis wake for each round trip without "
        "a halted CPU's exit (measured: stateless packets/s +6..15 %%, nfs/README.md); 'off' = leave the "
        "host's idle states alone (saves idle power; a laptop). An NF config's own cpu_latency_us wins",
    )  # fmt: skip
    s.add_argument("--solve-time-limit", type=float, default=5.0, help="placement solver time limit, s")
    s.add_argument(
        "--offload-tables", action="store_true",
        help="switching offload: after each re-placement also place OneSwitch's virtual tables on the host or an "
        "sNIC (within snics[].max_rules) and move them; off: only on demand (POST /v1/tables/place, "
        "uno agent tables --place)",
    )  # fmt: skip
    s.add_argument(
        "--nf-versions", default=str(VERSIONS_DIR),
        help="directory of versioned nf binaries (VERSION/nf; scripts/nf-version.sh adds one) that "
        "POST /v1/nfs/ID/update rolls NFs to (default nfs/versions)",
    )  # fmt: skip
    s.add_argument("--log-file", help="JSON log file (default RUNDIR/NAME/agent/agent.log; - = stderr)")
    s.set_defaults(func=cmd_serve)
    from uno_cli import chains_cmd, tables_cmd

    tables_cmd.register(asub)
    chains_cmd.register(asub)
    v = asub.add_parser("nf-versions", help="list the nf versions NFs can roll to (version, schema)")
    v.add_argument(
        "--nf-versions", default=str(VERSIONS_DIR), help="the versions directory (default nfs/versions)"
    )
    v.set_defaults(func=cmd_nf_versions)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def cmd_nf_versions(args: argparse.Namespace) -> int:
    """`uno agent nf-versions`: the default nf binary and the versions directory's, one JSON line each."""
    import json

    from nf_local.processes import NF_BINARY
    from nf_local.versions import NfVersions

    for row in NfVersions(Path(args.nf_versions), NF_BINARY).listing():
        print(json.dumps(row, sort_keys=True))
    return 0
