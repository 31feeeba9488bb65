"""The offload benchmark's pure parts (bench/offload/rules.py): the rule set, probes and figures."""

from __future__ import annotations

from bench.offload import rules


def test_every_rule_distinct_and_in_its_filter_table():
    lines = rules.flow_lines(70000, 100, 1)
    filters = [x for x in lines if ",udp," in x]
    assert len(filters) == 70000
    assert len({x.split(",udp,")[1].split(",actions")[0] for x in filters}) == 70000  # distinct matches
    assert sum(x.startswith("table=0,") for x in filters) == 35000
    assert sum("goto_table" in x for x in filters) == 17500  # a quarter allow
    assert "table=2,priority=10,in_port=1,actions=output:100" in lines
    assert "table=0,priority=0,actions=goto_table:1" in lines


def test_probes_cover_every_rule_once():
    for n in (1000, 32768, 64000, 70000):
        sent = {
            (rules.BASE_SPORT + f, dport) for flows, dport in rules.probes(n) for f in range(flows)
        }  # traffic gen: flow f has source port 10000 + f
        assert sent == {rules.match(i) for i in range(n)}


def test_fates_differences_and_wrong():
    n = 8
    arrived = [rules.match(i) for i in range(n) if rules.allowed(i)]
    fate = rules.fates(n, arrived)
    assert rules.wrong(n, fate) == 0
    leaked = rules.fates(n, [*arrived, rules.match(1)])
    assert rules.wrong(n, leaked) == 1 and rules.differences(fate, leaked) == 1
    assert rules.ratio(1.0, 4.0) == 0.25 and rules.ratio(1.0, 0) is None


def test_flows_new_is_one_per_packet_within_the_ports():
    assert rules.flows("new", 4000, 6) == 24000
    assert rules.flows("new", 4000, 10) == rules.SPAN  # one destination port offers SPAN source ports
    assert rules.flows("1024", 4000, 6) == 1024
    for bad in ("0", "-3", "abc", str(rules.SPAN + 1), "1.5"):
        assert rules.flows(bad, 4000, 6) is None


def test_table_profile_per_table_per_gbps_and_mpps():
    # 0.2 cores saved by moving 2 tables at 8,000 pkt/s of 125-byte frames (8 Mbit/s through the pipeline)
    # (64,000 rules: 32,000 per table)
    p = rules.table_profile(0.3, 0.1, 8000, 125, 2, 64000)
    assert p == {"r_host": 6.25, "cores_per_mpps": 12.5, "cores_per_mpps_per_1k_rules": 0.3906,
                 "cores_saved_per_table": 0.1}  # fmt: skip
    assert (
        rules.table_profile(0.1, 0.3, 8000, 125, 2, 64000)["r_host"] == 0
    )  # no saving: no cost, not negative
    assert rules.table_profile(0.3, 0.1, 0, 125, 2, 64000) is None


def test_split_at_high_keeps_half_of_each_table_allowing_and_dropping():
    n = 64000
    lines = [x for x in rules.flow_lines(n, 100, 1) if ",udp," in x]
    for t in rules.FILTERS:
        mine = [x for x in lines if x.startswith(f"table={t},")]
        high = [x for x in mine if f"priority={rules.HIGH}," in x]
        low = [x for x in mine if f"priority={rules.LOW}," in x]
        assert len(high) == len(low) == len(mine) // 2  # a split at HIGH keeps exactly half on the host
        for part in (high, low):  # table 0 allows and drops in both parts (table 1's rules all drop)
            assert any("drop" in x for x in part)
            assert any("goto_table" in x for x in part) == (t == 0)
    assert rules.split_counts(n) == {"host": n // 2, "snic": n}
    assert rules.PLACEMENTS["split"] == {t: ("snic0", rules.HIGH) for t in rules.FILTERS}
