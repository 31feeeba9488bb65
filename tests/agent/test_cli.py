"""`uno agent serve` refuses bad arguments with one line naming the option, exit 2, and starts nothing."""

from __future__ import annotations

import pytest

from uno_cli.main import main


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--listen", "nowhere"], "--listen"),
        (["--listen", "127.0.0.1:70000"], "--listen"),
        (["--listen", "0.0.0.0:0"], "--token-file"),
        (["--token-file", "/nonexistent/token"], "--token-file"),
        (["--sample-interval", "0"], "--sample-interval"),
        (["--sample-interval", "nan"], "--sample-interval"),
        (["--replace-interval", "-1"], "--replace-interval"),
        (["--threshold", "-1"], "--threshold"),
        (["--rel-threshold", "2"], "--rel-threshold"),
        (["--rel-threshold", "-0.1"], "--rel-threshold"),
        (["--dampening", "-1"], "--dampening"),
        (["--dampening", "inf"], "--dampening"),
        (["--drain", "61"], "--drain"),
        (["--profiles", "/nonexistent/profiles.json"], "profiles: no such file"),
        (["--max-moves", "-1"], "--max-moves"),
        (["--flap-window", "-1"], "--flap-window"),
        (["--flap-window", "nan"], "--flap-window"),
        (["--solve-time-limit", "0"], "--solve-time-limit"),
        (["--failover-interval", "5"], "--failover-interval"),
        (["--failover-interval", "-1"], "--failover-interval"),
        (["--warm-slots", "-1"], "--warm-slots"),
        (["--warm-slots", "9"], "--warm-slots"),
        (["--cpu-latency-us", "-1"], "--cpu-latency-us"),
        (["--cpu-latency-us", "1000001"], "--cpu-latency-us"),
        (["--cpu-latency-us", "none"], "--cpu-latency-us"),
        (["--name", "zz9q"], "not up"),
        (["--name", "Bad_Name"], "name"),
    ],
)
def test_bad_arguments(tmp_path, capsys, argv, needle):
    cfg = tmp_path / "h.yaml"
    cfg.write_text(f"name: zz9q\nrundir: {tmp_path}/run\n")
    assert main(["agent", "serve", "--config", str(cfg), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and err[0].startswith("uno agent: error:")
    assert not (tmp_path / "run" / "zz9q" / "agent").exists()


def test_status_text_shows_the_agent(capsys):
    # `uno status` without --json left the agent out (only the JSON had it)
    from uno_cli.host_cmd import _print_status

    status = {
        "name": "h", "up": True, "rundir": "/run/uno/h", "snics": [], "vms": [],
        "redis": {"url": "redis://127.0.0.1:1/0", "unix_socket": "/run/uno/h/redis.sock", "pid": 1},
        "host": {"bridge": "h-hbr", "netns": "h-host", "openflow": "unix:x", "ports": {}},
        "agent": {"rest": "http://127.0.0.1:2", "pid": 3, "running": False, "nfs": {"fw1": "snic0"}},
    }  # fmt: skip
    _print_status(status, json_out=False)
    line = capsys.readouterr().out.splitlines()[-1]
    assert "agent" in line and "http://127.0.0.1:2" in line and "not running" in line and "fw1" in line


def test_a_listen_port_in_use_is_exit_2_before_anything_starts(tmp_path, capsys):
    # was: werkzeug's "Address already in use", exit 1, after the warm slots were built (and left behind)
    import socket

    cfg = tmp_path / "h.yaml"
    cfg.write_text(f"name: zz9q\nrundir: {tmp_path}/run\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["agent", "serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--listen: cannot listen on 127.0.0.1:{port}" in err[0], err
    assert not (tmp_path / "run" / "zz9q" / "agent").exists()
