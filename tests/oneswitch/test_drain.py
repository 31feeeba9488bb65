"""The drain window of a remap on the real emulated host (issues 4 + 7: loss-free drain).

Vport 200 moves from the host NF namespace (host:200, nf0) to the spare namespace on snic0 (snic0:201, nf2)
with `drain_ms`: for that window host:200 stays an ingress-only port of vport 200, so a frame the old
instance still emits (one it received before the switch-over) is forwarded by the rule `in_port=200` like
before; OneSwitch never sends anything to it; after the window it is dropped like any unmapped port.
Real frames, real Open vSwitch, real OneSwitch.
"""

from __future__ import annotations

import time

import pytest

from emulated_host import naming as nm
from testkit.oneswitch.pktio import Endpoint, marked_arrivals, marked_frame, ofctl13

from .conftest import NF_HOST, ONESWITCH, SPARE_SNIC_OFPORT

pytestmark = ONESWITCH

MAGIC = b"DRAINWIN"
WINDOW_MS = (
    10_000  # generous: the in-window frames are sent within ~1 s of the remap even on a loaded machine
)


@pytest.fixture
def bed(os_host):
    n = os_host.name
    eps = {
        "vm0": Endpoint(nm.ns_vm(n, 0), nm.if_vm(n, 0)[0]).open(),
        "vm1": Endpoint(nm.ns_vm(n, 1), nm.if_vm(n, 1)[0]).open(),
        "old": os_host.nf(0).open(),  # host:200, where vport 200 starts
        "new": os_host.nf(2).open(),  # snic0:201, where it moves
    }
    c = os_host.client
    c.set_instances(NF_HOST, [("host", nm.NF_PORT_BASE)], drain_ms=0)  # whatever an earlier test left
    ofctl13(os_host.listen, "del-flows")
    ofctl13(os_host.listen, "add-flow", f"in_port={NF_HOST},actions=output:101")
    ofctl13(os_host.listen, "add-flow", f"in_port=100,actions=output:{NF_HOST}")
    try:
        yield os_host, eps
    finally:
        try:
            c.remap(NF_HOST, "host", nm.NF_PORT_BASE, drain_ms=0)
            ofctl13(os_host.listen, "del-flows")
        finally:
            for ep in eps.values():
                ep.close()


def host_dispatches(os_host, port: int) -> bool:
    """The host switch's table 0 still lets physical `port` into the pipeline (read from the switch itself)."""
    sws = os_host.host.switches()
    try:
        flows = ofctl13(sws["host"].driver.openflow, "dump-flows", "table=0")
    finally:
        for sw in sws.values():
            sw.close()
    return f"in_port={port} " in flows or f"in_port={port}," in flows


def test_old_port_is_ingress_only_for_the_window_then_dropped(bed):
    os_host, eps = bed
    c = os_host.client
    r = c.remap(NF_HOST, "snic0", SPARE_SNIC_OFPORT, drain_ms=WINDOW_MS)
    assert r.to["switch"] == "snic0"
    (p,) = [p for p in c.ports() if p.vport == NF_HOST]
    assert [(sw, port) for sw, port, _ in p.draining] == [("host", nm.NF_PORT_BASE)]
    assert p.draining[0][2] > time.time() * 1000

    for ep in eps.values():
        ep.drain()
    eps["old"].send(marked_frame(MAGIC, 1, "02:00:00:00:00:a1"))  # the leaving instance emits a late frame
    eps["new"].send(marked_frame(MAGIC, 2, "02:00:00:00:00:a2"))  # the new instance too
    eps["vm0"].send(marked_frame(MAGIC, 3, "02:00:00:00:00:10"))  # to vport 200: the new instance only
    sent_ms = time.time() * 1000
    got = marked_arrivals(eps, MAGIC)
    assert sent_ms < p.draining[0][2] - 1000, "sent too late to be inside the window (a stalled machine?)"
    assert got == {1: ["vm1"], 2: ["vm1"], 3: ["new"]}, got

    deadline = time.monotonic() + 30
    while any(q.draining for q in c.ports() if q.vport == NF_HOST) or host_dispatches(
        os_host, nm.NF_PORT_BASE
    ):
        assert time.monotonic() < deadline, "the drain window never ended"
        time.sleep(0.2)
    for ep in eps.values():
        ep.drain()
    eps["old"].send(
        marked_frame(MAGIC, 4, "02:00:00:00:00:a1")
    )  # after the window: an unmapped port, dropped
    eps["new"].send(marked_frame(MAGIC, 5, "02:00:00:00:00:a2"))
    assert marked_arrivals(eps, MAGIC) == {5: ["vm1"]}
