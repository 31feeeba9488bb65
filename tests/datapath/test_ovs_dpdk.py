"""The host switch on OVS-DPDK (ovs-vswitchd-dpdk, netdev bridge, hugetlbfs mounted, one PMD core), on this
machine with DPDK af_packet vdevs taking the switch's ends of veths: ping, HTTP, OpenFlow rules, an NF between
two namespaces and its move, a shaped link, hugepages given back. Each test is short: the PMD thread holds a
whole CPU while the switch runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from host_datapath.dpdk_options import DpdkOptions
from host_datapath.hugepages import HugepageReservation
from host_datapath.ovs_dpdk import DpdkHostSwitch
from host_datapath.sysutil import DatapathError, netns_add, shape, veth_pair, wait_for
from testkit.switch_testbed import SwitchTestbed, dpdk_missing, hugepages_total, wait_ping
from testkit.traffic import ping

REPO = Path(__file__).resolve().parents[2]
NF_BIN = REPO / "nfs" / "target" / "release" / "nf"

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
    pytest.mark.skipif(bool(dpdk_missing()), reason=dpdk_missing() or ""),
]

OPTIONS = DpdkOptions(hugepages_mb=256)  # one PMD thread on the highest CPU, 256 MB on node 0


def mounts_of(path: Path) -> list[str]:
    return [m for m in Path("/proc/mounts").read_text().splitlines() if str(path) in m]


@pytest.fixture
def tb():
    """A testbed whose teardown must leave nothing: namespaces, links, processes, mounts, hugepages."""
    before = hugepages_total()
    bed = SwitchTestbed(options=OPTIONS)
    with bed:
        yield bed
    assert bed.leftovers() == []
    wait_for(lambda: hugepages_total() == before, 30, f"nr_hugepages back to {before}", error=AssertionError)


def two_ends(tb: SwitchTestbed):
    tb.add_switch("sw", "dpdk")
    a = tb.attach("sw", "a", 1, "10.9.0.1/24")
    b = tb.attach("sw", "b", 2, "10.9.0.2/24")
    return a, b


def test_hugepages_reserved_mounted_and_given_back(tmp_path):
    before = hugepages_total()
    free = int(Path("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").read_text())
    res = HugepageReservation(tmp_path / "hp.json", tmp_path / "hp")
    try:
        res.acquire(free + 4)  # 4 more than are free: 4 added
        assert hugepages_total() == before + 4
        assert res.state()["added"] == 4
        assert mounts_of(tmp_path / "hp") and "hugetlbfs" in mounts_of(tmp_path / "hp")[0]
    finally:
        res.release()
    assert hugepages_total() == before
    assert not mounts_of(tmp_path / "hp") and not (tmp_path / "hp").exists()


def test_ping_http_and_openflow_rules(tb):
    a, b = two_ends(tb)
    sw = tb.switches["sw"]
    st = sw.status()
    assert st["datapath"] == "dpdk" and st["dpdk"]["initialized"]
    assert len(st["dpdk"]["pmd_threads"]) == len(OPTIONS.validate().pmd_cpus) == 1  # one PMD: one CPU held
    assert st["ports"] == {a.port: 1, b.port: 2}
    # the ports are DPDK af_packet vdevs on the veths' switch ends
    iface = sw.driver.api.db_get("Interface", a.port, "options").execute(check_error=True)
    assert iface["dpdk-devargs"].startswith(f"net_af_packet_{a.port},iface={a.port}")

    assert not ping(a.ns, b.ip, count=1)  # fail_mode secure, no flows: nothing passes
    tb.add_flows("sw", ["in_port=1,actions=output:2", "in_port=2,actions=output:1"])
    wait_ping(a.ns, b.ip)
    assert ping(a.ns, b.ip) and ping(b.ns, a.ip)

    www = tb.http_server("b")
    blob = os.urandom(2 << 20)  # 2 MB: full-size TCP segments both ways through the PMD
    (www / "blob").write_bytes(blob)
    assert tb.http_get("a", f"http://{b.ip}:8000/hello.txt") == b"hello from b\n"
    assert tb.http_get("a", f"http://{b.ip}:8000/blob") == blob

    def flows_counted() -> bool:  # the userspace datapath adds its counts to the rules' in its own time
        flows = {f.match: f for f in sw.driver.flow_stats()}
        return flows["in_port=2"].packets > 1000 and flows["in_port=1"].packets > 100  # the blob is b's

    wait_for(flows_counted, 10, "the rules' counters to show the transfer", error=AssertionError)
    stats = sw.driver.port_stats()
    assert stats[b.port]["rx_packets"] > 1000 and stats[a.port]["tx_packets"] > 1000

    # a rule in front drops ICMP from a; the rest still flows
    sw.driver.add_flows(["priority=40000,in_port=1,icmp,actions=drop"])
    # the datapath's cached flows are revalidated after the change, not within it
    wait_for(lambda: not ping(a.ns, b.ip, count=1), 10, "the drop rule to take", error=AssertionError)
    assert not ping(a.ns, b.ip, count=3)
    assert tb.http_get("a", f"http://{b.ip}:8000/hello.txt") == b"hello from b\n"
    sw.driver.del_flows("in_port=1,icmp")
    wait_ping(a.ns, b.ip)
    # ovs-ofctl against the bridge's management socket works as on any bridge
    out = tb.ofctl("sw", "dump-ports-desc")
    assert f"1({a.port})" in out and f"2({b.port})" in out


def test_port_errors_name_the_reason(tb):
    tb.add_switch("sw", "dpdk")
    sw = tb.switches["sw"]
    assert isinstance(sw, DpdkHostSwitch)
    with pytest.raises(DatapathError, match="net_af_packet|could not|No such"):
        sw.add_bridge_port("nosuchif0", 5)  # no such kernel interface for the af_packet vdev
    sw.driver.del_port("nosuchif0")
    with pytest.raises(DatapathError, match="not in host.switch.dpdk.pci"):
        sw.attach_pci("pf0", 6, "0000:03:00.0")


def test_a_pci_port_dpdk_cannot_probe_fails_naming_the_device():
    """A PCI address allowed to DPDK (`host.switch.dpdk.pci`) that no device on this machine answers: the port
    add fails with OVS's reason and the port is not left on the bridge (a BlueField's PF bound to vfio-pci
    takes the same path on a real server)."""
    before = hugepages_total()
    addr = "0000:7e:1f.7"  # no such device here
    bed = SwitchTestbed(options=DpdkOptions(hugepages_mb=256, pci=(addr,)))
    with bed:
        bed.add_switch("sw", "dpdk")
        sw = bed.switches["sw"]
        with pytest.raises(DatapathError, match=addr.replace(".", r"\.")) as exc:
            sw.attach_pci("pf0", 6, addr)
        assert "Error attaching device" in str(exc.value)
        assert "pf0" not in sw.driver.api.list_ports(sw.bridge).execute(check_error=True)
    assert bed.leftovers() == []
    wait_for(lambda: hugepages_total() == before, 30, f"nr_hugepages back to {before}", error=AssertionError)


def test_vhost_user_port_is_added_and_waits_for_its_vm(tb):
    """A vhost-user client port comes up in OVS without its VM (it keeps reconnecting), link down."""
    tb.add_switch("sw", "dpdk")
    sw = tb.switches["sw"]
    sock = tb.dir / "vm0.sock"
    sw.attach_vhost_user("vm0", 100, str(sock))
    assert sw.driver.ports()["vm0"] == 100
    row = sw.driver.api.db_find("Interface", ("name", "=", "vm0"), columns=["type", "options", "link_state"])
    row = row.execute(check_error=True)[0]
    assert row["type"] == "dpdkvhostuserclient" and row["options"] == {"vhost-server-path": str(sock)}
    assert row["link_state"] in ("down", [])
    sw.detach("vm0")
    assert "vm0" not in sw.driver.ports()


def tbf_sent_packets(port: str, netns: str) -> int:
    """Packets the tbf qdisc on `port` has sent (its `Sent N bytes M pkt` counter)."""
    out = subprocess.run(["ip", "netns", "exec", netns, "tc", "-s", "qdisc", "show", "dev", port],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "qdisc tbf" in out, out
    return int(out.split(" pkt")[0].rsplit(" ", 1)[1])


def test_shaped_port_keeps_its_qdisc(tb):
    """The af_packet vdev bypasses the kernel qdisc by default; a port added as `shaped` keeps a tc tbf in the
    way (what a PCIe link on the DPDK host switch needs): the tbf's own counters show which packets it sent."""
    tb.add_switch("sw", "dpdk")
    sw = tb.switches["sw"]
    a = tb.attach("sw", "a", 1, "10.9.0.1/24")
    sent = {}
    for ofport, shaped in ((2, False), (3, True)):
        key = f"s{int(shaped)}"
        ns = tb._ns(key)
        port = f"{tb.name}{key}1"
        netns_add(ns)
        veth_pair(f"{tb.name}{key}0", ns, port, sw.netns, mtu=sw.veth_mtu)
        shape(port, sw.netns, 0.2)  # towards the namespace
        sw.add_bridge_port(port, ofport, shaped=shaped)
        subprocess.run(
            ["ip", "-n", ns, "addr", "add", f"10.9.0.{ofport}/24", "dev", f"{tb.name}{key}0"], check=True
        )
        tb.add_flows("sw", [f"in_port=1,actions=output:{ofport}", f"in_port={ofport},actions=output:1"])
        wait_ping(a.ns, f"10.9.0.{ofport}")
        before = tbf_sent_packets(port, sw.netns)
        assert ping(a.ns, f"10.9.0.{ofport}", count=20)
        sent[shaped] = tbf_sent_packets(port, sw.netns) - before
    assert sent[True] >= 20, sent  # every echo request went through the tbf
    assert sent[False] < 20, (
        sent
    )  # bypassed: the echo requests did not (the PMD wrote to the device directly)


@pytest.mark.skipif(not NF_BIN.exists(), reason="nf not built (make setup)")
def test_nf_between_two_namespaces_and_its_move(tb):
    """a -> firewall (one-arm, state in Redis) -> b on the DPDK bridge; then a second instance on another port
    takes over (its flows first, then the ingress re-pointed, then the first stopped): ping, HTTP and TCP
    connections opened before the move keep working."""
    a, b = two_ends(tb)
    store = tb.start_redis()
    fw = {
        "rules": [
            {"action": "allow", "proto": "icmp", "src": "10.9.0.1/32", "dst": "any"},
            {
                "action": "allow",
                "proto": "tcp",
                "src": "10.9.0.1/32",
                "dst": "10.9.0.2/32",
                "dst_port": "7000-8000",
            },
        ],
        "default": "deny",
    }
    nf1 = tb.attach("sw", "nf1", 3)
    nf2 = tb.attach("sw", "nf2", 4)
    fw1 = tb.start_nf("nf1", NF_BIN, "firewall", fw, store, "fw", "fw-1")

    def egress(nf: int) -> list[str]:  # what leaves NF port `nf`: by its source, to the other side
        return [f"priority=10,in_port={nf},dl_src={a.mac},actions=output:2",
                f"priority=10,in_port={nf},dl_src={b.mac},actions=output:1"]  # fmt: skip

    def ingress(nf: int) -> list[str]:
        return [f"priority=10,in_port=1,actions=output:{nf}", f"priority=10,in_port=2,actions=output:{nf}"]

    tb.add_flows("sw", egress(3) + ingress(3))
    wait_ping(a.ns, b.ip)
    tb.http_server("b")
    assert tb.http_get("a", f"http://{b.ip}:8000/hello.txt") == b"hello from b\n"
    # the firewall decides: b may not open a connection to a
    tb.http_server("a", 8000)
    with pytest.raises(RuntimeError):
        tb.http_get("b", f"http://{a.ip}:8000/hello.txt", timeout=1.5)

    # long-lived TCP connections a -> b across the move
    env = dict(os.environ, PYTHONPATH=str(REPO))
    seconds = 8.0
    tb.spawn(
        "b",
        [sys.executable, "-m", "testkit.probes", "server", b.ip, "7000", str(seconds + 4)],
        env=env,
        cwd=REPO,
    )
    time.sleep(0.5)
    client = tb.spawn(
        "a",
        [sys.executable, "-m", "testkit.probes", "client", b.ip, "7000", "4", str(seconds), "--every-ms", "20"],
        env=env, cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(2.0)
    before_move = tb.nf_stats("fw-1")["counters"]["rx"]

    t0 = time.monotonic()
    tb.start_nf("nf2", NF_BIN, "firewall", fw, store, "fw", "fw-2")
    tb.add_flows("sw", egress(4))  # make before break: the new instance's way out first
    tb.add_flows("sw", ingress(4))  # then the traffic to it (one bundle: atomic)
    move_s = time.monotonic() - t0
    time.sleep(0.5)
    fw1.terminate()  # the first instance, stopped once drained
    out, _ = client.communicate(timeout=seconds + 20)
    res = json.loads(out.strip().splitlines()[-1])
    assert res["conns"] == 4 and res["broken"] == 0 and res["stalled"] == 0, res
    assert tb.nf_stats("fw-2")["counters"]["rx"] > 50, "the second instance carried traffic"
    assert before_move > 50
    assert ping(a.ns, b.ip)
    assert tb.http_get("a", f"http://{b.ip}:8000/hello.txt") == b"hello from b\n"
    print(f"move (start nf + re-point flows) {move_s * 1000:.0f} ms, max TCP gap {res['max_gap_ms']} ms")
    assert nf1.ofport == 3 and nf2.ofport == 4


def test_emulated_host_crash_then_down_gives_everything_back(host_factory):
    """`uno up` with host.switch.dpdk, then the DPDK vswitchd killed (-9) and the host's state file lost: the
    sweep of `uno down` still unmounts the hugetlbfs and gives the pages back (nothing else is left either:
    host_factory checks)."""
    before = hugepages_total()
    host = host_factory(vms=1, snics=[{"pcie_gbps": 0}], host={"switch": {"dpdk": {"hugepages_mb": 128}}})
    status = host.up()
    assert status["host"]["datapath"] == "dpdk" and status["host"]["dpdk"]["initialized"]
    mount = Path(status["host"]["dpdk"]["hugepages"]["mount"])
    assert mounts_of(mount)
    os.kill(status["host"]["pids"]["ovs-vswitchd"], 9)
    host.state_file.unlink()
    host.down()
    assert not mounts_of(mount)
    wait_for(lambda: hugepages_total() == before, 30, f"nr_hugepages back to {before}", error=AssertionError)


def test_emulated_host_plugs_a_vhost_user_vm_and_an_emulated_one(host_factory, tmp_path):
    """`vms: [{name, port: {type: vhostuser, socket}}, {name}]` on a managed OVS-DPDK host switch: the real VM's
    port is a dpdkvhostuserclient of its socket (waiting for QEMU, link down), the emulated VM's an af_packet
    vdev on its veth (MTU 1500); `uno status` lists both."""
    sock = str(tmp_path / "web.sock")
    host = host_factory(
        vms=[{"name": "web", "port": {"type": "vhostuser", "socket": sock}}, {"name": "db"}],
        snics=[{"pcie_gbps": 0}],
        host={"switch": {"dpdk": {"hugepages_mb": 128}}},
    )
    status = host.up()
    vms = {vm["name"]: vm for vm in status["vms"]}
    assert vms["web"]["type"] == "vhostuser" and vms["web"]["socket"] == sock and vms["web"]["netns"] is None
    assert status["host"]["ports"][vms["web"]["host_port"]] == vms["web"]["host_ofport"]
    sw = host.host_switch()
    try:
        rows = sw.driver.api.db_find(
            "Interface", ("name", "=", vms["web"]["host_port"]), columns=["type", "options", "link_state"]
        ).execute(check_error=True)
        assert rows[0]["type"] == "dpdkvhostuserclient" and rows[0]["options"] == {"vhost-server-path": sock}
        assert rows[0]["link_state"] in ("down", [])
        db = sw.driver.api.db_get("Interface", vms["db"]["host_port"], "options").execute(check_error=True)
        assert db["dpdk-devargs"].startswith(f"net_af_packet_{vms['db']['host_port']},")
    finally:
        sw.close()
    mtu = subprocess.run(["ip", "netns", "exec", vms["db"]["netns"], "cat", f"/sys/class/net/{vms['db']['ifname']}/mtu"],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert mtu == "1500"


def test_two_switches_starting_at_once_both_get_their_pages():
    """Two OVS-DPDK switches started at the same moment each reserve their own pages (neither counts the other's
    not yet taken pages as free for itself), both initialise, and stopping them gives back what each added."""
    before = hugepages_total()
    beds = [SwitchTestbed(options=DpdkOptions(hugepages_mb=64)) for _ in range(2)]
    errors: list[BaseException] = []

    def start(bed: SwitchTestbed) -> None:
        try:
            bed.add_switch("sw", "dpdk")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    try:
        for bed in beds:
            bed.__enter__()
        threads = [threading.Thread(target=start, args=(bed,)) for bed in beds]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert not errors, errors
        assert all(bed.switches["sw"].status()["dpdk"]["initialized"] for bed in beds)
    finally:
        for bed in beds:
            bed.close()
    assert all(bed.leftovers() == [] for bed in beds)
    wait_for(lambda: hugepages_total() == before, 30, f"nr_hugepages back to {before}", error=AssertionError)


def test_tap_port_made_by_a_net_tap_vdev(tb):
    """attach_tap: DPDK's net_tap PMD makes a kernel tap in the switch's namespace (the host's own stack on the
    bridge): a namespace plugged in on an af_packet port pings an address on it."""
    tb.add_switch("sw", "dpdk")
    sw = tb.switches["sw"]
    a = tb.attach("sw", "a", 1, "10.9.0.1/24")
    tap = f"{tb.name}tap"
    sw.attach_tap(tap, 7)
    assert sw.driver.ports()[tap] == 7
    opts = sw.driver.api.db_get("Interface", tap, "options").execute(check_error=True)
    assert opts["dpdk-devargs"] == f"net_tap_{tap},iface={tap}" and opts["n_rxq"] == "2"
    subprocess.run(["ip", "-n", sw.netns, "addr", "add", "10.9.0.7/24", "dev", tap], check=True)
    subprocess.run(["ip", "-n", sw.netns, "link", "set", tap, "up"], check=True)
    tb.add_flows("sw", ["in_port=1,actions=output:7", "in_port=7,actions=output:1"])
    wait_ping(a.ns, "10.9.0.7")
    assert ping(a.ns, "10.9.0.7", count=3)
    sw.detach(tap)
    assert tap not in sw.driver.ports()
