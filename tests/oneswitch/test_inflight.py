"""A frame still crossing the PCIe link under the old port map (a remap moved its vport meanwhile) is
forwarded to the vport's place, never dropped: every switch routes every live flow-id tag from every PCIe
side, back out of the link it came in by when that is the way. Real switches, real frames: the frame is
injected tagged at the wrong end of the link with a packet-out on the physical switch itself."""

from __future__ import annotations

import contextlib
import re
import time

import pytest

from emulated_host import naming as nm

from .conftest import NF_HOST, NF_SNIC, ONESWITCH, SPARE_SNIC_OFPORT
from .test_physical_refusal import ofctl

pytestmark = ONESWITCH
MARK = b"uno-inflight-0123456789"


def wait_no_drains(os_host, timeout: float = 15.0) -> None:
    """Until no port drains: a remap of an earlier test (OneSwitch's default window, 2 s) leaves its old port
    draining, and a frame tagged for the vport that reaches that port's switch from the vport's link then
    goes to the old port, as one tagged before that remap (Translator.leftPort), not where these tests
    expect it."""
    deadline = time.monotonic() + timeout
    while any(p.draining for p in os_host.client.ports()):
        assert time.monotonic() < deadline, "a draining port did not expire"
        time.sleep(0.1)


@pytest.fixture
def clean(os_host):
    for cmd in ("del-flows", "del-groups"):
        assert ofctl(os_host, cmd).returncode == 0
    wait_no_drains(os_host)
    yield os_host
    for cmd in ("del-flows", "del-groups"):
        ofctl(os_host, cmd)


def tagged_output(sw) -> tuple[int, int]:
    """(tag, PCIe port) of the one translated rule on physical switch `sw`: it pushes the tag."""
    for f in sw.driver.flow_stats():
        if f.table == 1:
            m = re.search(r"set_field:(\d+)->vlan_vid.*output:(\d+)", f.actions)
            if m:
                return int(m.group(1)) & 0xFFF, int(m.group(2))
    raise AssertionError("no tagged translation")


def frame(tag: int) -> bytes:
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    return bytes(
        Ether(src="02:00:00:00:00:aa", dst="02:00:00:00:00:bb") / Dot1Q(vlan=tag, type=0x88B6) / Raw(MARK)
    )


def inject_at(sw, in_port: int, frame_bytes: bytes, ns) -> bytes:
    """Inject `frame_bytes` at switch `sw` as if it had just come in over PCIe port `in_port`; returns the one
    frame endpoint `ns` receives (asserted: exactly one carrying MARK)."""
    ep = ns.open()
    try:
        ep.drain()
        sw.driver.ofctl("packet-out", f"in_port={in_port},packet={frame_bytes.hex()},actions=output:table")
        got = received(ep)
    finally:
        ep.close()
    assert len(got) == 1, f"expected the frame once at {ns}, got {len(got)}"
    return got[0]


def untagged(got: bytes) -> None:
    assert got[12:14] == b"\x88\xb6", "delivered without the flow-id tag"


def received(ep, n_tries: int = 40) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(n_tries):
        got += [f for f in ep.drain() if MARK in f]
        if got:
            return got
        time.sleep(0.05)
    return got


@pytest.mark.parametrize("where", ["snic", "host"])
def test_tagged_frame_at_the_wrong_end_reaches_the_vport(clean, where):
    """where=snic: the vport (201) is on snic0 but the frame reached the host; the host sends it back.
    where=host: the vport (200) is on the host but the frame reached snic0; snic0 sends it back."""
    os_host = clean
    sws = os_host.host.switches()
    try:
        if where == "snic":
            vport, ingress_v, sw, ns = NF_SNIC, 100, sws["host"], os_host.nf(1)
        else:
            vport, ingress_v, sw, ns = NF_HOST, 1, sws["snic0"], os_host.nf(0)
        # A rule that crosses PCIe toward the vport makes its tag live; read tag and link port off the switch.
        assert ofctl(os_host, "add-flow", f"in_port={ingress_v},actions=output:{vport}").returncode == 0
        ofctl(os_host, "dump-flows")  # a barrier round: installed everywhere
        tag, pcie = tagged_output(sw)
        # As if the frame had just come in over PCIe at the switch where the vport is NOT (the ingress
        # switch itself: its rule sends the frame away over this link).
        untagged(inject_at(sw, pcie, frame(tag), ns))
    finally:
        for s in sws.values():
            s.close()


@contextlib.contextmanager
def moved_next_to_its_sender(os_host, drain_ms: int):
    """Vport 200 (host) whose only sender is snic0's wire port (vport 1: snic0 tags its frames toward the
    host) moved to the spare port on snic0 with `drain_ms`; yields (switches, the old tag); moved back after."""
    sws = os_host.host.switches()
    c = os_host.client
    try:
        assert ofctl(os_host, "add-flow", f"in_port=1,actions=output:{NF_HOST}").returncode == 0
        ofctl(os_host, "dump-flows")  # a barrier round: installed everywhere
        tag, _ = tagged_output(sws["snic0"])  # snic0 tags toward vport 200 on the host
        c.remap(NF_HOST, "snic0", SPARE_SNIC_OFPORT, drain_ms=drain_ms)
        try:
            yield sws, tag
        finally:
            c.remap(NF_HOST, "host", nm.NF_PORT_BASE, drain_ms=0)
    finally:
        for s in sws.values():
            s.close()


def test_tag_the_remap_stopped_using_still_reaches_the_new_place(clean):
    """A remap that leaves no rule sending to the vport across PCIe keeps its tag routed for a moment
    (PortChanges.LINGER_MS) toward the vport's new place: a frame the old sender tagged just before the
    switch-over (still on the link, or sent by a datapath still on its old megaflows) is delivered there,
    not dropped by a deleted tag rule. Vport 200 (host) moves to the spare port on snic0, next to its only
    sender (snic0's wire port, vport 1); the frame carrying its old tag reaches the host from the link."""
    with moved_next_to_its_sender(clean, drain_ms=0) as (sws, tag):
        with pytest.raises(AssertionError):
            tagged_output(sws["snic0"])  # the sender now outputs locally: nothing uses the tag
        untagged(inject_at(sws["host"], nm.HOST_PCIE_OFPORT_BASE, frame(tag), clean.nf(2)))  # the spare


def test_a_frame_tagged_before_a_remap_reaches_the_draining_old_port(clean):
    """While the old port drains (drain_ms), a frame carrying the vport's tag that reaches the OLD switch from
    the NEW switch's link can only have been tagged before the remap (the new switch delivers the vport's
    frames itself): it goes to the old instance, which still runs and forwards it before its drain answers.
    Sent on to the new place (as with drain_ms 0, above) it would arrive there after frames sent later: a
    buffered, order-preserving move reordered a few packets under load that way."""
    with moved_next_to_its_sender(clean, drain_ms=60_000) as (sws, tag):
        untagged(inject_at(sws["host"], nm.HOST_PCIE_OFPORT_BASE, frame(tag), clean.nf(0)))  # the old port


def slot_tag(sw, port: int) -> int:
    """The flow-id tag that switch `sw` delivers from its PCIe side to its port `port` (table 0: the tag of the
    instance slot `port` serves)."""
    for f in sw.driver.flow_stats():
        if f.table == 0 and re.search(rf"pop_vlan,output:{port}$", f.actions):
            m = re.search(r"dl_vlan=(\d+)", f.match)
            if m:
                return int(m.group(1))
    raise AssertionError(f"no tag delivered to port {port}")


def test_a_frame_tagged_for_a_removed_instance_reaches_it_while_it_drains(clean):
    """A shrink: vport 200 over the host's port and snic0's spare port, then over the host's port alone, the
    spare draining. A frame tagged for the removed slot before the shrink (on the link, or sent by a datapath
    still on its cached old select buckets) reaches snic0 from the link: it goes to the leaving instance,
    which forwards it before its drain answers. Sent on to slot mod k (the host's instance, the staying one)
    it arrived there after its flow's later frames: the held scale-ins of `uno bench ops --part scale`
    reordered at every scale-in that way."""
    c = clean.client
    sws = clean.host.switches()
    try:
        # the host's VM (vport 100) sends to vport 200: the host's select group tags slot 1 toward snic0
        assert ofctl(clean, "add-flow", f"in_port=100,actions=output:{NF_HOST}").returncode == 0
        c.set_instances(NF_HOST, [("host", nm.NF_PORT_BASE), ("snic0", SPARE_SNIC_OFPORT)])
        tag = slot_tag(sws["snic0"], SPARE_SNIC_OFPORT)
        c.set_instances(NF_HOST, [("host", nm.NF_PORT_BASE)], drain_ms=3000)
        # within the removed tag's linger (PortChanges.LINGER_MS): its rules are still there
        untagged(inject_at(sws["snic0"], nm.SNIC_PCIE_OFPORT, frame(tag), clean.nf(2)))  # the leaving port
    finally:
        for s in sws.values():
            s.close()
