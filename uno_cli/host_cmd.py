"""`uno up | down | status | run`: the emulated host's lifecycle from the command line."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from domain.errors import CliError
from emulated_host import naming as nm
from emulated_host.config import load_config
from emulated_host.host import AlreadyRunning, EmulatedHost, ping
from host_datapath.sysutil import DatapathError


def host_from_args(args: argparse.Namespace) -> EmulatedHost:
    cfg = load_config(args.config)
    # `--name ""` (an empty variable in a script) must not mean the default host
    if getattr(args, "name", None) is not None:
        from dataclasses import replace

        from emulated_host.config import parse_config

        parse_config({"name": args.name})  # validates the name
        cfg = replace(cfg, name=args.name)
    return EmulatedHost(cfg)


def cmd_up(args: argparse.Namespace) -> int:
    host = host_from_args(args)
    try:
        status = host.up()
    except AlreadyRunning as exc:
        print(f"uno up: {exc}; nothing changed", file=sys.stderr)
        return 0
    except DatapathError as exc:
        raise CliError(str(exc)) from None
    _print_status(status, args.json)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    hosts = [host_from_args(args)]
    if args.all:
        from dataclasses import replace

        cfg = hosts[0].config
        names = sorted(p.name for p in cfg.rundir.iterdir() if p.is_dir()) if cfg.rundir.is_dir() else []
        hosts = [EmulatedHost(replace(cfg, name=n)) for n in names if nm.valid_name(n)]
    for host in hosts:
        try:
            host.down()
        except DatapathError as exc:
            raise CliError(str(exc)) from None
        print(f"emulated host '{host.name}' is down", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    status = host_from_args(args).status()
    _print_status(status, args.json)
    return 0 if status.get("up") else 1


def install_bootstrap_flows(status: dict) -> None:
    """L2 learning on every bridge, for running the host with no controller attached (`uno run`)."""
    from host_datapath.switch import SwitchDriver

    for sw in [status["host"], *[s for s in status["snics"] if s.get("backend") == "emulated"]]:
        drv = SwitchDriver(sw["bridge"], sw["ovsdb"], openflow=sw["openflow"])
        drv.add_flows(["table=0,priority=0,actions=NORMAL"])


def cmd_run(args: argparse.Namespace) -> int:
    host = host_from_args(args)
    if host.config.oneswitch.enabled:
        return _run_demo(host, args)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        status = host.up()
    except AlreadyRunning as exc:  # someone else's running host: leave it exactly as it is
        raise CliError(f"{exc}; run `uno down` first") from None
    except DatapathError as exc:
        host.down()  # a failed bring-up leaves nothing behind
        raise CliError(str(exc)) from None
    except BaseException:
        host.down()
        raise
    try:
        via = "host switch, PCIe, sNIC"
        if "oneswitch" in status:
            from emulated_host.oneswitch import install_flows, l2_flows

            install_flows(status["oneswitch"]["listen"], l2_flows(status))
            via = "OneSwitch (host switch, PCIe, sNIC)"
        else:
            install_bootstrap_flows(status)
        _print_status(status, json_out=False)
        snic0 = status["snics"][0]
        if status["vms"] and snic0.get("eth_ports"):
            vm, eth = status["vms"][0], snic0["eth_ports"][0]
            ok = ping(vm["netns"], eth["ip"])
            print(f"ping {vm['name']} ({vm['ip']}) -> outside ({eth['ip']}) via {via}: "
                  f"{'ok' if ok else 'FAILED'}")  # fmt: skip
            if not ok and args.once:
                return 1
        if args.once:
            return 0
        print("emulated host is up; Ctrl-C tears it down", flush=True)
        stop.wait()
        return 0
    except DatapathError as exc:
        raise CliError(str(exc)) from None
    finally:
        host.down()
        print(f"emulated host '{host.name}' is down", file=sys.stderr)


def _run_demo(host: EmulatedHost, args: argparse.Namespace) -> int:
    """The demo service chain (demo): controller, host, agent, NFs; always torn down."""
    from demo.run import Demo

    def _interrupt(*_):
        raise KeyboardInterrupt

    demo = Demo(host, args.config, args.once, out=lambda line: print(line, flush=True))
    stop = threading.Event()
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _interrupt)
        return demo.run(stop.wait)
    except KeyboardInterrupt:
        print("interrupted: tearing down", file=sys.stderr)
        return 0 if not args.once else 130
    except DatapathError as exc:
        raise CliError(str(exc)) from None
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)  # the teardown itself is not interruptible
        if demo.teardown():
            print(f"emulated host '{host.name}' is down (agent, controller and NFs stopped)", file=sys.stderr)


def _what_is_down(status: dict) -> str:
    """For a host that was brought up but is not up any more: which parts died and what `uno up` will do."""
    if "host" not in status:
        return ""
    switches = [("host", status["host"]), *[(sn["id"], sn) for sn in status["snics"] if "running" in sn]]
    dead = [f"switch {sw_id}" for sw_id, sw in switches if not sw["running"]]
    r = status["redis"]
    dead_nodes = [n["address"] for n in r.get("nodes", []) if r.get("mode") == "cluster" and not n.get("pid")]
    services = [f"redis ({', '.join(dead_nodes)})" if dead_nodes else "redis"] if not r.get("running") else []
    services += ["oneswitch"] if "oneswitch" in status and not status["oneswitch"]["running"] else []
    services += [
        f"{sn['id']}'s agent" for sn in status["snics"] if sn.get("agent") and not sn.get("agent_pid")
    ]
    if not dead and not services:
        return " (its bring-up did not complete: `uno up` brings it up afresh)"
    if dead:
        return f": {', '.join(dead + services)} not running (`uno up` brings the whole host up afresh)"
    return f": {' and '.join(services)} not running (`uno up` restarts {'them' if len(services) > 1 else 'it'} alone)"


def _print_status(status: dict, json_out: bool) -> None:
    if json_out:
        print(json.dumps(status, indent=2, sort_keys=True))
        return
    if not status.get("up"):
        print(f"emulated host '{status['name']}' is not up{_what_is_down(status)}")
        return
    h, r = status["host"], status["redis"]
    print(f"emulated host '{status['name']}' (rundir {status['rundir']})")
    if r.get("mode", "local") == "local":
        print(f"  redis   {r['url']} unix socket {r.get('unix_socket')} pid {r['pid']}")
    else:
        nodes = ", ".join(
            f"{n['address']} {n['role']}{' FAILED' if n.get('failed') else ''}" for n in r["nodes"]
        )
        print(f"  redis   {r['mode']} {r['url']}  nodes: {nodes}")
    print(
        f"  host    bridge {h['bridge']} in netns {h['netns']}  openflow {h['openflow']}  ports {h['ports']}"
    )
    if h.get("datapath") == "dpdk":
        d, hp = h["dpdk"], h["dpdk"]["hugepages"]
        print(f"          OVS-DPDK ({d.get('version', '?')}): PMD threads {d.get('pmd_threads', [])} on CPUs "
              f"{d['pmd_cpus']}, {(hp['pages'] or 0) * 2} MB of hugepages, hugetlbfs at {hp['mount']}")  # fmt: skip
    for s in status["snics"]:
        line = f"  {s['id']}   {s['backend']} bridge {s['bridge']} capacity {s['capacity']}"
        if "pcie" in s:
            cg = s["cgroup"]
            line += f"  pcie {s['pcie']['gbps']} Gbit/s/dir  cpu quota {cg['cpu_quota']} cores"
            if cg.get("cpu_period_us"):
                line += (
                    f" per {cg['cpu_period_us'] / 1000:g} ms (throttled {cg.get('nr_throttled', 0)} periods)"
                )
        if s.get("agent"):
            line += f"  agent {s['agent']}" + ("" if s.get("agent_pid") else " (not running)")
        print(line)
    for vm in status["vms"]:
        print(f"  {vm['name']}     netns {vm['netns']} {vm['ip']} on host port {vm['host_ofport']}")
    if "oneswitch" in status:
        o = status["oneswitch"]
        print(f"  oneswitch  listen {o['listen']}  rest {o['rest']}  dpid {o['dpid']}  pid {o['pid']}  "
              f"vports {[p['vport'] for p in o['ports']]}")  # fmt: skip
    if "agent" in status:
        a = status["agent"]
        state = "running" if a["running"] else "not running (`uno agent serve` adopts its NFs)"
        print(f"  agent   {a['rest']}  pid {a['pid']} {state}  nfs {a['nfs']}")


def register(sub: argparse._SubParsersAction) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", help="YAML config (default: the shipped defaults)")
        p.add_argument("--name", help="instance name (overrides the config's)")

    p = sub.add_parser("up", help="bring up the emulated host (switches, sNICs, PCIe links, VMs, Redis)")
    common(p)
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("down", help="tear the emulated host down, leaving nothing behind")
    common(p)
    p.add_argument(
        "--all", action="store_true", help="every emulated host with a rundir under the config's rundir"
    )
    p.set_defaults(func=cmd_down)
    p = sub.add_parser("status", help="show the emulated host (exit 1 when it is not up)")
    common(p)
    p.add_argument("--json", action="store_true", help="one JSON object: host, snics, redis, vms")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("run", help="the main job: bring the host up, show it, run until Ctrl-C, tear down")
    common(p)
    p.add_argument("--once", action="store_true", help="a bounded run: up, check the path, down")
    p.set_defaults(func=cmd_run)
