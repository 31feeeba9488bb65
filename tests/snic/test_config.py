"""The sNIC agent's config (pure): `parse_config` refuses every bad key or value with a CliError that names
the key, accepts a full valid config (and a minimal one, with the defaults), and a config it accepts makes
the agent start or refuse in one line, never crash with a traceback."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from domain.errors import CliError
from nf_local.processes import NF_BINARY
from snic_agent.config import SnicAgentConfig, load_config, parse_config

REPO = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token.A~+/=_-"


@pytest.fixture
def token_file(tmp_path) -> Path:
    p = tmp_path / "agent.token"
    p.write_text(TOKEN + "\n")  # a trailing newline (an editor's) is not part of the token
    return p


@pytest.fixture
def minimal(token_file, tmp_path) -> dict:
    return {
        "snic": "snic0",
        "listen": "192.0.2.2:7700",
        "token_file": str(token_file),
        "dir": str(tmp_path / "agent"),
        "prefix": "uno",
        "bridge": "ovsbr1",
        "ovsdb": "unix:/var/run/openvswitch/db.sock",
        "switch_netns": "uno-dpu",
    }


@pytest.fixture
def full(minimal) -> dict:
    return {
        **minimal,
        "nf_binary": "/opt/uno-snic/nf",
        "cgroup": "uno-snic-nfs",
        "cpu_quota": 1.5,
        "cpu_period_us": 20_000,
        "warm_slots": 8,
        "pcie_port": "pf0hpf",
        "wire_ports": ["p0", "p1"],
    }


def refused(data, key: str) -> str:
    """Parse_config(data) raises CliError whose message names `key` first; returns the message."""
    with pytest.raises(CliError) as exc:
        parse_config(data)
    msg = str(exc.value)
    assert msg.startswith(f"config: {key}:"), msg
    assert "\n" not in msg.strip()
    return msg


# -- accepted -------------------------------------------------------------------------------------------------
def test_full_valid_config_is_accepted_with_every_value(full, tmp_path):
    cfg = parse_config(full)
    assert cfg == SnicAgentConfig(
        snic="snic0",
        listen=("192.0.2.2", 7700),
        token=TOKEN,
        directory=tmp_path / "agent",
        prefix="uno",
        bridge="ovsbr1",
        ovsdb="unix:/var/run/openvswitch/db.sock",
        switch_netns="uno-dpu",
        nf_binary=Path("/opt/uno-snic/nf"),
        cgroup="uno-snic-nfs",
        cpu_quota=1.5,
        cpu_period_us=20_000,
        warm_slots=8,
        pcie_port="pf0hpf",
        wire_ports=("p0", "p1"),
    )
    assert isinstance(cfg.cpu_quota, float)


def test_minimal_config_takes_the_defaults(minimal):
    cfg = parse_config(minimal)
    assert cfg.nf_binary == NF_BINARY
    assert (cfg.cgroup, cfg.cpu_quota, cfg.cpu_period_us, cfg.pcie_port, cfg.wire_ports) == (None,) * 5
    assert cfg.warm_slots == 0


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("listen", "[::1]:7700", ("::1", 7700)),
        ("listen", "10.0.0.1:65535", ("10.0.0.1", 65535)),
        ("listen", "10.0.0.1:1", ("10.0.0.1", 1)),
        ("cpu_quota", 2, 2.0),
        ("cpu_quota", 0.01, 0.01),
        ("cpu_period_us", 1000, 1000),
        ("cpu_period_us", 1_000_000, 1_000_000),
        ("warm_slots", 0, 0),
        ("wire_ports", [], ()),
        ("snic", "snic15", "snic15"),
        ("prefix", "a", "a"),
        ("prefix", "a123456789", "a123456789"),
        ("cgroup", None, None),
        ("pcie_port", None, None),
    ],
)
def test_boundary_values_are_accepted(minimal, key, value, expect):
    cfg = parse_config({**minimal, key: value})
    attr = {"listen": "listen"}.get(key, key)
    assert getattr(cfg, attr) == expect


def test_token_of_8_and_of_256_characters_is_accepted(minimal, tmp_path):
    for n in (8, 256):
        p = tmp_path / f"tok{n}"
        p.write_text("a" * n)
        assert parse_config({**minimal, "token_file": str(p)}).token == "a" * n


def test_load_config_reads_a_json_file(full, tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps(full))
    assert load_config(f) == parse_config(full)
    f.write_text("{not json")
    with pytest.raises(CliError, match="is not JSON"):
        load_config(f)
    with pytest.raises(CliError, match="cannot read"):
        load_config(tmp_path / "missing.json")


# -- refused, naming the key ----------------------------------------------------------------------------------
@pytest.mark.parametrize("data", [[], "x", None, 3])
def test_not_an_object(data):
    with pytest.raises(CliError, match="expected a JSON object"):
        parse_config(data)


def test_unknown_key_is_named(minimal):
    msg = refused({**minimal, "listen_addr": "1.2.3.4:5"}, "listen_addr")
    assert "unknown key" in msg and "listen" in msg  # and it lists the known ones


@pytest.mark.parametrize(
    "key", ["snic", "listen", "token_file", "dir", "prefix", "bridge", "ovsdb", "switch_netns"]
)
def test_missing_required_key_is_named(minimal, key):
    data = dict(minimal)
    del data[key]
    assert "missing" in refused(data, key)


@pytest.mark.parametrize(
    "value",
    [
        "0.0.0.0:7700",  # never the unspecified address
        "[::]:7700",
        "0.0.0.0",
        "10.0.0.1",  # no port
        "10.0.0.1:",
        "10.0.0.1:0",
        "10.0.0.1:65536",
        "10.0.0.1:-1",
        "10.0.0.1:http",
        "host.example:7700",  # an address, not a name
        "junk",
        ":7700",
        "",
        "10.0.0.1:7700:1",
        7700,
        None,
        ["10.0.0.1", 7700],
    ],
)
def test_bad_listen(minimal, value):
    refused({**minimal, "listen": value}, "listen")


@pytest.mark.parametrize(
    "value",
    [
        "10.0.0.1: 7700",  # int() takes surrounding blanks,
        "10.0.0.1:+7700",  # a sign,
        "10.0.0.1:77_00",  # underscores
        "10.0.0.1:\u0667\u0667\u0660\u0660",  # and non-ASCII digits ("7700" in Arabic-Indic digits)
    ],
)
def test_listen_port_is_ascii_digits_only(minimal, value):
    """A port with blanks, a sign, underscores or other scripts' digits (int() would take it) is refused."""
    refused({**minimal, "listen": value}, "listen")


@pytest.mark.parametrize("value", ["snic", "snic100", "eth0", "SNIC0", "snic-1", "", 0, None])
def test_bad_snic(minimal, value):
    refused({**minimal, "snic": value}, "snic")


@pytest.mark.parametrize(
    "value", ["Uno", "1uno", "uno_x", "uno.x", "abcdefghijk", "", "-uno", 5, None, ["uno"]]
)
def test_bad_prefix(minimal, value):
    refused({**minimal, "prefix": value}, "prefix")


@pytest.mark.parametrize(("key", "value"), [("snic", "snic0\n"), ("prefix", "uno\n")])
def test_trailing_newline_is_refused(minimal, key, value):
    """A trailing newline ("snic0\\n", "uno\\n") is refused: it would go into every name the agent makes."""
    refused({**minimal, key: value}, key)


def test_token_file_missing(minimal, tmp_path):
    msg = refused({**minimal, "token_file": str(tmp_path / "nope")}, "token_file")
    assert "cannot read" in msg


def test_token_file_is_a_directory(minimal, tmp_path):
    refused({**minimal, "token_file": str(tmp_path)}, "token_file")


@pytest.mark.parametrize(
    "content",
    [
        "",
        "short",
        "1234567",  # 7 < 8
        "a" * 257,
        "has space in it",
        "tab\there-1234",
        "t\u00f6ken-t\u00f6ken",
        "semi;colon;token",
        "quote'token'1",
        "two\nlines-token",
    ],
)
def test_token_file_bad_content(minimal, tmp_path, content):
    p = tmp_path / "bad.token"
    p.write_text(content)
    refused({**minimal, "token_file": str(p)}, "token_file")


@pytest.mark.parametrize("value", ["", 0, None, ["f"]])
def test_token_file_bad_value(minimal, value):
    refused({**minimal, "token_file": value}, "token_file")


@pytest.mark.parametrize(
    "value", [0, 0.0, -1, -0.5, math.nan, math.inf, -math.inf, True, False, "1", [1], {"cores": 1}]
)
def test_bad_cpu_quota(minimal, value):
    refused({**minimal, "cpu_quota": value}, "cpu_quota")


@pytest.mark.parametrize("value", [0, 999, 1_000_001, -1000, 10_000.0, True, "10000", math.nan])
def test_bad_cpu_period_us(minimal, value):
    refused({**minimal, "cpu_period_us": value}, "cpu_period_us")


@pytest.mark.parametrize("value", [-1, 9, 100, True, False, 1.0, "1", None])
def test_bad_warm_slots(minimal, value):
    refused({**minimal, "warm_slots": value}, "warm_slots")


@pytest.mark.parametrize("value", ["p0", ["p0", 1], ["p0", ""], [None], {"p0": 1}, 0, [["p0"]]])
def test_bad_wire_ports(minimal, value):
    refused({**minimal, "wire_ports": value}, "wire_ports")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("dir", ""),
        ("dir", 1),
        ("dir", None),
        ("bridge", ""),
        ("bridge", ["br"]),
        ("ovsdb", ""),
        ("ovsdb", None),
        ("switch_netns", ""),
        ("switch_netns", 0),
        ("nf_binary", ""),
        ("nf_binary", None),
        ("cgroup", ""),
        ("cgroup", 1),
        ("pcie_port", ""),
        ("pcie_port", 0),
    ],
)
def test_bad_string_values(minimal, key, value):
    refused({**minimal, key: value}, key)


# -- a config parse_config accepts: the agent starts with it, or says in one line why not -------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_agent_with_a_tcp_ovsdb_refuses_in_one_line(minimal, tmp_path):
    """The agent drives its own machine's OVS: `ovsdb` must be `unix:PATH` (its bridge's local OpenFlow socket
    is found beside it). A tcp: remote is refused naming the key, and the agent exits 2 with one line (it
    died with a traceback before)."""
    data = {**minimal, "listen": f"127.0.0.1:{_free_port()}", "ovsdb": "tcp:127.0.0.1:1",
            "switch_netns": "uno-test-none"}  # fmt: skip
    with pytest.raises(CliError, match="^config: ovsdb: "):
        parse_config(data)
    conf = tmp_path / "agent.json"
    conf.write_text(json.dumps(data))
    p = subprocess.Popen(
        [sys.executable, "-m", "snic_agent", "--config", str(conf), "--log-file", str(tmp_path / "log")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # it serves: fine (then it printed its URL)
        p.terminate()
        out, err = p.communicate(timeout=10)
        assert out.startswith(f"http://{data['listen']}"), (out, err)
        return
    assert "Traceback" not in err, err
    assert p.returncode == 2, (p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("uno-snic-agent: error: "), err


def test_agent_refuses_a_bad_config_in_one_line(minimal, tmp_path):
    conf = tmp_path / "agent.json"
    conf.write_text(json.dumps({**minimal, "listen": "0.0.0.0:7700"}))
    p = subprocess.run(
        [sys.executable, "-m", "snic_agent", "--config", str(conf)],
        capture_output=True, text=True, timeout=30, cwd=REPO,
    )  # fmt: skip
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert p.stderr.startswith("uno-snic-agent: error: config: listen:")
    assert not (tmp_path / "agent").exists()  # nothing made for a refused config
