"""In-process settings inside a named namespace (host_datapath.netns_ops via sysutil), checked with the system
tools: they act in the namespace and only there; bad names and missing namespaces or devices are errors."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from host_datapath import netns_ops
from host_datapath.sysutil import (
    DatapathError,
    in_netns,
    kill_and_wait,
    link_exists,
    netns_add,
    netns_del,
    netns_members,
    netns_pids,
)
from testkit.hosts import needs_root, unique_name

pytestmark = [pytest.mark.root, needs_root]


@pytest.fixture
def ns():
    name = f"{unique_name()}-ns"
    try:
        netns_add(name)
        yield name
    finally:
        netns_del(name)


def ip_link_line(netns: str, dev: str) -> str:
    return subprocess.run(["ip", "-n", netns, "-o", "link", "show", "dev", dev], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip


def test_settings_act_in_the_namespace_only(ns):
    assert "UP" in ip_link_line(ns, "lo").split(">")[0]  # netns_add set loopback up
    subprocess.run(["ip", "-n", ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1"], check=True)
    assert link_exists("d0", ns) and not link_exists("d0")  # not in the caller's namespace
    in_netns(ns, lambda: netns_ops.link_up("d0"))
    assert ",UP" in ip_link_line(ns, "d0")
    in_netns(ns, lambda: netns_ops.disable_ipv6("d0"))
    v6 = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv6.conf.d0.disable_ipv6"],
                        capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert v6 == "1"
    root = subprocess.run(["sysctl", "-n", "net.ipv6.conf.lo.disable_ipv6"], capture_output=True, text=True)
    assert root.stdout.strip() == "0"  # the caller's namespace keeps its own setting


def test_errors_name_what_is_wrong(ns):
    with pytest.raises(DatapathError, match="no-such-dev"):
        in_netns(ns, lambda: netns_ops.link_up("no-such-dev"))
    with pytest.raises(DatapathError, match="no-such-dev"):
        in_netns(ns, lambda: netns_ops.disable_ipv6("no-such-dev"))
    with pytest.raises(DatapathError, match=f"{ns}-gone"):
        in_netns(f"{ns}-gone", lambda: None)
    for bad in ("", "..", "a/b"):
        with pytest.raises(DatapathError, match="invalid network namespace name"):
            in_netns(bad, lambda: None)
        assert not netns_ops.netns_exists(bad)
    with pytest.raises(DatapathError, match="invalid interface name"):
        in_netns(ns, lambda: netns_ops.link_up("x" * 16))
    assert not link_exists("lo", f"{ns}-gone")


def test_netns_members_finds_the_processes_of_the_named_namespaces_only(ns):
    inside = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "30"])
    outside = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 5
        while inside.pid not in netns_pids(ns) and time.monotonic() < deadline:  # `ip netns exec` ran sleep
            time.sleep(0.05)
        got = netns_members([ns, "no-such-namespace"])
        assert inside.pid in got and outside.pid not in got and os.getpid() not in got
        assert sorted(got) == sorted(netns_pids(ns))
        assert netns_members(["no-such-namespace"]) == [] and netns_members([]) == []
    finally:
        for p in (inside, outside):
            kill_and_wait(p.pid, 5)
            p.wait()
