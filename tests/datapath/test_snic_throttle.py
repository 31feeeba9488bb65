"""An NF in an sNIC's CPU-quota cgroup that is throttled while frames arrive loses none of them: its AF_PACKET
ring holds what arrives during a throttle (128 blocks, each retired after at most 1 ms: at least 128 ms of
arrivals at rates where a block does not fill within 1 ms, far longer than a throttle of the default period).

Real parts: the `nf` binary on a veth, `traffic gen`/`traffic sink` on the peer (testkit/veth_testbed.py,
`direct`), a real cgroup made by snic_datapath/cgroup.py. The group's quota is used up by a busy neighbour (a
process spinning in the same group, as another NF on the sNIC would), so the group is throttled in every
period whatever the NF's own cost per frame. Asserted: the group was throttled while the generator sent, every
frame reached the sink, the kernel dropped none at the NF's port. No timing is asserted; everything started
is stopped and the group removed, also when the test fails."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from nf_runtime.runtime import NF_BINARY
from snic_datapath.cgroup import PERIOD_US, CpuCgroup
from testkit.hosts import needs_root
from testkit.procs import last_json, wait_exit
from testkit.veth_testbed import Testbed

TRAFFIC = NF_BINARY.parent / "traffic"
needs_bins = pytest.mark.skipif(
    not NF_BINARY.exists() or not TRAFFIC.exists(), reason="nfs not built (make setup)"
)
FLOWS, PKTS, RATE = 4, 500, 4000  # 2,000 frames over ~0.5 s: a few frames per 1 ms ring block
CORES = 0.2  # the group's quota, shared by the NF and the spinning neighbour


@pytest.mark.root
@needs_root
@needs_bins
def test_a_throttled_nf_loses_no_frame_below_its_ring_capacity():
    with Testbed(
        "/run/uno-test", direct=True
    ) as tb:  # removes namespaces, Redis and the rundir on every exit
        cg = CpuCgroup(f"uno-{tb.name}-snic0")
        nf = spinner = None
        try:
            cg.create(CORES, PERIOD_US)
            cfg = tb.dir / "fw.json"
            cfg.write_text(
                json.dumps({"rules": [{"action": "allow", "proto": "tcp", "dst_port": 80}], "spin_us": 0})
            )
            nf = tb.start_nf(NF_BINARY, "firewall", "local", cfg)
            cg.add(nf.pid)
            spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
            cg.add(spinner.pid)
            sink = tb.start_sink(TRAFFIC, ["--run", "1", "--expect", str(FLOWS * PKTS), "--idle-ms", "5000",
                                           "--duration-ms", "120000"])  # fmt: skip
            before = cg.throttling()
            gen = tb.traffic(TRAFFIC, "gen", ["--run", "1", "--flows", str(FLOWS), "--pkts", str(PKTS),
                                              "--rate", str(RATE), "--dst-port", "80"])  # fmt: skip
            sent = last_json(wait_exit(gen, 120))
            during = cg.throttling()
            got = last_json(wait_exit(sink, 130))
            spinner.kill()
            nf.send_signal(signal.SIGTERM)
            stats = last_json(nf.communicate(timeout=30)[0].decode())["counters"]
        finally:
            for p in (spinner, nf):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
            cg.destroy()
    assert not cg.exists()
    assert sent["sent"] == sent["frames"]  # the generator put every frame on the wire
    assert during.throttled > before.throttled  # the NF's group was stopped while frames arrived
    assert (got["received"], got["lost"], got["duplicates"]) == (FLOWS * PKTS, 0, 0)
    assert stats["port_drops"] == 0
