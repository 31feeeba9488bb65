"""Deleting an NF with `drop_state=true` deletes its keys on the real state tier (root; the emulated host's
Redis, real NAT processes, the agent's REST API in-process), and only its keys; without it they stay (another
host sharing the tier may still run the NF). A bad query is 400 naming it and deletes nothing."""

from __future__ import annotations

import pytest

from nf_agent.api import create_app
from state_tier.keys import tenant_prefix
from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS
from testkit.testbed import Testbed

pytestmark = LIVE_MARKS


def _nat(ip: str) -> dict:
    return {"inside": ["10.0.0.0/8"], "public_ips": [ip], "ports": "20000-20009", "port_block": 1}


@pytest.fixture(scope="module")
def bed():
    tb = Testbed()
    try:
        tb.up()
        yield tb, create_app(tb.agent).test_client()
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


def _keys(redis, nf_id: str) -> set[bytes]:
    return set(redis.scan_iter(match=f"{tenant_prefix('default')}nf:{nf_id}:*", count=500))


def test_delete_keeps_or_drops_the_nf_state_as_asked(bed):
    tb, api = bed
    for nf_id, ip in (("nt", "198.51.100.1"), ("nt2", "198.51.100.2")):
        r = api.post("/v1/nfs", json={"type": "nat", "id": nf_id, "config": _nat(ip), "pin": "host"})
        assert r.status_code == 201, r.get_json()
    redis = tb.runtime.tier_client()
    try:
        mine, other = _keys(redis, "nt"), _keys(redis, "nt2")
        assert mine and other, "each NAT seeds its pool on the tier"

        for query, field in (("drop_state=yes", "query.drop_state"), ("dropstate=true", "query.dropstate")):
            r = api.delete(f"/v1/nfs/nt?{query}")
            assert r.status_code == 400 and r.get_json()["field"] == field, r.get_json()
        assert api.get("/v1/nfs/nt").status_code == 200 and _keys(redis, "nt") == mine, (
            "a 400 changed something"
        )

        r = api.delete("/v1/nfs/nt?drop_state=true")
        assert r.status_code == 200, r.get_json()
        assert r.get_json() == {"deleted": "nt", "state_keys_dropped": len(mine)}
        assert _keys(redis, "nt") == set() and _keys(redis, "nt2") == other, "only nt's keys are dropped"

        r = api.delete("/v1/nfs/nt2")
        assert r.status_code == 200 and r.get_json() == {"deleted": "nt2"}, r.get_json()
        assert _keys(redis, "nt2") == other, "kept without drop_state"
        assert tb.runtime.drop_state("nt2") == len(other) and _keys(redis, "nt2") == set()
    finally:
        redis.close()


def test_drop_state_takes_glob_characters_in_an_id_literally(bed):
    """An NF id is not a pattern: `a*` drops the keys of `a*` only, not those of `ab`."""
    tb, _ = bed
    redis = tb.runtime.tier_client()
    try:
        keys = [f"{tenant_prefix('default')}nf:{i}:{{x}}" for i in ("a*", "ab", "a[b]", "ab?")]
        for k in keys:
            redis.set(k, b"1")
        assert tb.runtime.drop_state("a*") == 1
        assert [bool(redis.exists(k)) for k in keys] == [False, True, True, True]
        assert tb.runtime.drop_state("a[b]") == 1 and tb.runtime.drop_state("ab?") == 1
        assert tb.runtime.drop_state("ab") == 1 and not any(redis.exists(k) for k in keys)
    finally:
        redis.close()
