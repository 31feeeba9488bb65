"""Config validation: every bad value is a one-line error naming the field, and nothing starts."""

import subprocess
import sys
from pathlib import Path

import pytest

from domain.errors import CliError
from emulated_host.config import load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_have_one_snic():
    cfg = load_config(None)
    assert cfg.name == "uno" and cfg.vms == 2
    assert [s.id for s in cfg.snics] == ["snic0"]
    assert cfg.snics[0].capacity == 36 and cfg.snics[0].pcie_gbps == 40


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"nmae": "x"}, "nmae"),
        ({"snics": [{"capacity": -1}]}, "snics[0].capacity"),
        ({"snics": [{"cpu_quota": 0}]}, "snics[0].cpu_quota"),
        ({"snics": [{"cpu_quota": -0.5}]}, "snics[0].cpu_quota"),
        ({"snics": [{"cpu_period_us": 999}]}, "snics[0].cpu_period_us"),
        ({"snics": [{"cpu_period_us": 1_000_001}]}, "snics[0].cpu_period_us"),
        ({"snics": [{"cpu_period_us": 10_000.5}]}, "snics[0].cpu_period_us"),
        ({"snics": [{"cpu_period_us": True}]}, "snics[0].cpu_period_us"),
        ({"snics": [{"cpu_quota": 0.05, "cpu_period_us": 10_000}]}, "snics[0].cpu_period_us"),
        ({"snics": [{"capacity": 3, "cpu_period_us": 10_000}]}, "snics[0].cpu_period_us"),
        ({"snics": [{"pcie_gbps": "fast"}]}, "snics[0].pcie_gbps"),
        ({"snics": [{"colour": "red"}]}, "snics[0].colour"),
        ({"snics": [{"eth_ports": 0}]}, "snics[0].eth_ports"),
        ({"snics": [{"max_rules": -1}]}, "snics[0].max_rules"),
        ({"snics": [{"max_rules": 1.5}]}, "snics[0].max_rules"),
        ({"snics": [{"max_rules": "64k"}]}, "snics[0].max_rules"),
        ({"snics": [{"max_rules": 10**12}]}, "snics[0].max_rules"),
        ({"snics": [{"backend": "fpga"}]}, "snics[0].backend"),
        ({"snics": [{"backend": "bluefield"}]}, "snics[0].ovsdb"),
        ({"snics": [{"id": "snic3"}]}, "snics[0].id"),
        (
            {"snics": [{"backend": "bluefield", "ovsdb": "1.2.3.4", "openflow": "tcp:a:1", "bridge": "b"}]},
            "snics[0].ovsdb",
        ),
        (
            {
                "snics": [
                    {
                        "backend": "bluefield",
                        "ovsdb": "tcp:a:1",
                        "openflow": "tcp:a:2",
                        "bridge": "b",
                        "datapath_type": "dpdk",
                    }
                ]
            },
            "snics[0].datapath_type",
        ),
        ({"snics": []}, "snics"),
        ({"vms": True}, "vms"),
        ({"vms": -2}, "vms"),
        ({"name": "Bad-Name"}, "name"),
        ({"redis": {"port": 70000}}, "redis.port"),
        ({"redis": {"host": "x"}}, "redis.host"),
        ({"redis": {"mode": "sentinel"}}, "redis.mode"),
        ({"redis": {"mode": "cluster", "masters": 2}}, "redis.masters"),  # redis-cli needs 3 masters
        ({"redis": {"mode": "cluster", "replicas": 5}}, "redis.replicas"),
        ({"redis": {"mode": "cluster", "masters": True}}, "redis.masters"),
        ({"redis": {"mode": "cluster", "port": 65531}}, "redis.port"),  # its 6 ports run past 65535
        ({"redis": {"mode": "cluster", "nodes": ["a:1"]}}, "redis.nodes"),  # would be ignored silently
        ({"redis": {"mode": "external"}}, "redis.nodes"),  # required
        ({"redis": {"mode": "external", "nodes": "a:1"}}, "redis.nodes"),
        ({"redis": {"mode": "external", "nodes": ["a"]}}, "redis.nodes[0]"),
        ({"redis": {"mode": "external", "nodes": ["a:1", "b:0"]}}, "redis.nodes[1]"),
        ({"redis": {"mode": "external", "nodes": ["a:1"], "port": 6379}}, "redis.port"),
        ({"redis": {"mode": "external", "nodes": ["a:1"], "masters": 3}}, "redis.masters"),
        ({"redis": {"mode": "external", "nodes": ["a:1"], "user": "a b"}}, "redis.user"),
        ({"redis": {"mode": "external", "nodes": ["a:1"], "password_file": "pw"}}, "redis.password_file"),
        (
            {"redis": {"mode": "external", "nodes": ["a:1"], "password_file": "/no/such"}},
            "redis.password_file",
        ),
        ({"redis": {"user": "admin"}}, "redis.user"),  # local: this host's own Redis
        ([1, 2], "top level"),
        ({"snics": [{"capacity": float("nan")}]}, "snics[0].capacity"),  # YAML .nan: was accepted
        ({"snics": [{"pcie_gbps": float("inf")}]}, "snics[0].pcie_gbps"),
        ({"snics": [{"cpu_quota": float("nan")}]}, "snics[0].cpu_quota"),
        ({"rundir": "relative/dir"}, "rundir"),  # was accepted: redis failed, a directory was left in the cwd
    ],
)
def test_bad_values_name_the_field(doc, field):
    with pytest.raises(CliError) as err:
        parse_config(doc)
    assert f"config: {field}:" in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(CliError, match="file not found"):
        load_config(tmp_path / "nope.yaml")


def test_invalid_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("snics: [\n")
    with pytest.raises(CliError, match="not valid YAML") as err:
        load_config(p)
    assert "\n" not in str(err.value)  # one line for the operator, with where it broke
    assert "line " in str(err.value)


def test_cli_bad_config_starts_nothing(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: zzbad\nsnics:\n  - capacity: -3\n")
    out = subprocess.run(
        [sys.executable, "-m", "uno_cli.main", "up", "--config", str(p)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "snics[0].capacity" in out.stderr and "Traceback" not in out.stderr
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "zzbad-" not in ns


def test_cpu_quota_follows_capacity_unless_given():
    from emulated_host.config import quota_cores

    a, b, c = parse_config({"snics": [{}, {"capacity": 144}, {"capacity": 144, "cpu_quota": 0.25}]}).snics
    assert [quota_cores(s.capacity, s.cpu_quota) for s in (a, b, c)] == [0.5, 2.0, 0.25]
    assert quota_cores(0, None) == 0.01  # a zero-capacity sNIC still gets a valid (tiny) quota


def test_cpu_period_given_or_the_default_for_the_quota():
    from emulated_host.config import period_us
    from snic_datapath.cgroup import PERIOD_US

    a, b, c, d = parse_config(
        {
            "snics": [
                {},
                {"cpu_period_us": 5_000},
                {"cpu_quota": 0.01},
                {"capacity": 0, "cpu_period_us": 100_000},
            ]
        }
    ).snics
    assert [period_us(s) for s in (a, b, d)] == [PERIOD_US, 5_000, 100_000]
    assert period_us(c) == max(PERIOD_US, 100_000)  # 0.01 core gets the kernel's 1 ms only per 100 ms or more
    with pytest.raises(
        CliError, match=r"snics\[0\]\.cpu_period_us: CPU quota 0.05 cores x 10000 us period = 500 us"
    ):
        parse_config({"snics": [{"cpu_quota": 0.05, "cpu_period_us": 10_000}]})


def test_an_empty_name_option_is_an_error_not_the_default_host():
    # `uno down --name "$EMPTY"` tore down the default host 'uno' (someone else's)
    import argparse

    from uno_cli.host_cmd import host_from_args

    with pytest.raises(CliError, match="config: name: '' must be"):
        host_from_args(argparse.Namespace(config=None, name=""))
    assert host_from_args(argparse.Namespace(config=None, name="zz1")).name == "zz1"
    assert host_from_args(argparse.Namespace(config=None, name=None)).name == "uno"


def test_redis_modes_parse():
    assert parse_config({}).tier.mode == "local"
    cl = parse_config({"redis": {"mode": "cluster", "masters": 6, "replicas": 0, "port": 7000}})
    assert (cl.tier.mode, cl.tier.masters, cl.tier.replicas, cl.redis_port) == ("cluster", 6, 0, 7000)
    ext = parse_config(
        {"redis": {"mode": "external", "nodes": ["10.0.0.1:7000", "[::1]:7001"], "user": "uno"}}
    )
    assert ext.tier.nodes == ("10.0.0.1:7000", "[::1]:7001") and ext.tier.user == "uno"
