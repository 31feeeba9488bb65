"""The owner-cache epoch is bumped after a move of an NF run with `owner_cache` (fakes for the agent's logic;
the INCR itself against a real redis-server)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest
import redis

from nf_agent.validation import NfRequest
from nf_runtime.runtime import HostRuntime
from testkit.fakes import make_agent


def _nf(agent, nf_id, config):
    return agent.create_nf(NfRequest(id=nf_id, type="firewall", config=config, expected_gbps=0.1, src=None,
                                     dst=None, pin=None, prefer="host"))  # fmt: skip


def test_bumped_after_a_move_only_with_owner_cache(tmp_path):
    agent, rt, _, _ = make_agent(tmp_path)
    bumps = []
    rt.bump_epoch = lambda nf_id, tenant="default": bumps.append(nf_id) or len(bumps)
    cached, plain = _nf(agent, "c", {"owner_cache": True}), _nf(agent, "p", {})
    agent.migrate(cached, "snic0")
    agent.migrate(plain, "snic0")
    assert bumps == ["c"] and agent.counters.epoch_bumps == 1

    def broken(nf_id, tenant="default"):
        raise OSError("redis down")

    rt.bump_epoch = broken
    agent.migrate(cached, "host")  # committed anyway; the failure is reported with the move
    assert cached.location == "host"
    assert any("epoch not bumped" in e for e in agent.last_migration.cleanup_errors)


@pytest.mark.skipif(not shutil.which("redis-server"), reason="no redis-server")
def test_bump_epoch_increments_the_key_in_redis(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        rt = HostRuntime.__new__(HostRuntime)  # only the Redis port is needed
        rt.redis_port = port
        rt.tier = None  # the host's own Redis
        deadline = time.monotonic() + 20
        while True:
            try:
                assert rt.bump_epoch("fw") == 1
                break
            except Exception:  # redis.ConnectionError until the server listens
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert rt.bump_epoch("fw") == 2
        r = redis.Redis(port=port)
        assert r.get("tn:default:nf:fw:{epoch}") == b"2"  # the key the NFs read (flowstore::keys)
        r.close()
    finally:
        srv.kill()
        srv.wait()
