"""os-ken's reactive `simple_switch_13` (an app no one here wrote, run unmodified under osken-manager) as the
only controller of OneSwitch: it installs its own table-miss flow, learns MAC addresses from PACKET_INs and
installs per-pair rules; VMs and the outside (across PCIe) ping each other with no help from the test."""

from __future__ import annotations

from emulated_host import naming as nm
from testkit.hosts import unique_name
from testkit.oneswitch.osken_app import APPS, OsKenApp

from .conftest import ONESWITCH, bring_up, counter, physical_errors, teardown
from .test_faucet import reaches

pytestmark = ONESWITCH


def test_simple_switch_13_forwards_through_oneswitch(tmp_path):
    app = OsKenApp(tmp_path / "osken", APPS / "simple_switch_13.py").start()
    host = None
    try:
        name = unique_name()
        host, _ = bring_up(name=name, oneswitch={"controllers": [app.target]})
        client = host.oneswitch().client(timeout=30)
        ns = {
            "vm0": (nm.ns_vm(name, 0), nm.ip_vm(0)),
            "vm1": (nm.ns_vm(name, 1), nm.ip_vm(1)),
            "out0": (nm.ns_outside(name, 0, 0), nm.ip_outside(0, 0)),
            "out1": (nm.ns_outside(name, 0, 1), nm.ip_outside(0, 1)),
        }
        pairs = [("vm0", "vm1"), ("vm0", "out0"), ("out1", "vm1"), ("out0", "out1")]
        failed = [f"{a} -> {b}" for a, b in pairs if not reaches(ns[a][0], ns[b][1], 30)]
        assert not failed, f"pings failed: {failed}\n{app.tail(30)}"
        rules = client.rules()
        assert any(r.priority == 0 and r.table == 0 and r.physical for r in rules)  # its table-miss flow
        assert any(r.priority == 1 and r.physical for r in rules)  # and rules it learnt from PACKET_INs
        assert physical_errors(client) == 0
        assert counter(client, "oneswitch_translation_errors_total") == 0
    finally:
        try:
            if host is not None:
                teardown(host)
        finally:
            app.stop()
