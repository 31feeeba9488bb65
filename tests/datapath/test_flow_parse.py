"""The ovs-ofctl dump-flows parser, on real output shapes of OVS 3.1."""

import pytest

from host_datapath.switch import parse_dump_flows
from host_datapath.sysutil import DatapathError

SAMPLE = """OFPST_FLOW reply (OF1.3) (xid=0x2):
 cookie=0x1f, duration=3.1s, table=0, n_packets=12, n_bytes=1176, priority=10,in_port=7,dl_vlan=100 actions=pop_vlan,output:2
 cookie=0x0, duration=0.126s, table=0, n_packets=2, n_bytes=172, priority=0 actions=NORMAL
 cookie=0x0, duration=1.0s, table=3, n_packets=0, n_bytes=0, idle_timeout=10, ip,nw_dst=10.0.0.1 actions=drop
"""


def test_parses_stats_priority_and_match():
    flows = parse_dump_flows(SAMPLE)
    assert len(flows) == 3
    a, b, c = flows
    assert (a.cookie, a.table, a.priority, a.packets, a.bytes) == (0x1F, 0, 10, 12, 1176)
    assert a.match == "in_port=7,dl_vlan=100" and a.actions == "pop_vlan,output:2"
    assert (b.priority, b.match, b.actions) == (0, "", "NORMAL")
    assert (c.table, c.priority, c.match) == (3, 32768, "ip,nw_dst=10.0.0.1")


def test_garbage_is_an_error():
    with pytest.raises(DatapathError):
        parse_dump_flows(" cookie=0x0, duration=1s, table=0 nonsense\n")


PORTS = """OFPST_PORT reply (OF1.3) (xid=0x2): 3 ports
  port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
           duration=1.128s
  port  1: rx pkts=3, bytes=266, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=5, bytes=400, drop=1, errs=0, coll=0
           duration=1.042s
  port 100: rx pkts=7, bytes=700, drop=?, errs=0, frame=0, over=0, crc=0
           tx pkts=3, bytes=266, drop=0, errs=0, coll=0
"""


def test_parses_dump_ports():
    from host_datapath.switch import parse_dump_ports

    ports = parse_dump_ports(PORTS)
    assert sorted(ports) == [1, 100]
    assert ports[1] == {"rx_packets": 3, "rx_bytes": 266, "rx_dropped": 0, "tx_packets": 5, "tx_bytes": 400,
                        "tx_dropped": 1}  # fmt: skip
    assert ports[100]["rx_dropped"] == 0 and ports[100]["tx_packets"] == 3
