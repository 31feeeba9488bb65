"""The live update's pure decisions: which version may take over an NF's state (nf_agent.compat), how an nf
config refusal names its field (nf_local.versions.config_error), and the request bodies (validation)."""

from __future__ import annotations

import pytest

from domain.errors import ValidationError
from nf_agent import compat, validation
from nf_local.versions import NfSchema, config_error, record_lifetime_s


def schema(version: str, writes: int, reads: tuple[int, ...], snapshot: int = 1) -> NfSchema:
    return NfSchema(version, snapshot, {"firewall": (writes, reads)})


def test_a_version_reading_every_written_layout_may_take_over():
    assert compat.refusal("firewall", [1], schema("2", 2, (1, 2)), schema("1", 1, (0, 1)), False) is None
    assert compat.layouts_after("firewall", [1], schema("2", 2, (1, 2))) == [1, 2]


def test_a_version_missing_one_written_layout_is_refused_naming_it():
    why = compat.refusal("firewall", [1, 2], schema("1", 1, (0, 1)), schema("2", 2, (1, 2)), False)
    assert why is not None and "layout 2" in why and "reads 0, 1" in why


def test_an_unknown_type_and_a_snapshot_change_are_refused():
    assert "no nat NF" in (compat.refusal("nat", [1], schema("2", 1, (1,)), None, False) or "")
    why = compat.refusal("firewall", [1], schema("2", 1, (1,), snapshot=2), schema("1", 1, (1,)), True)
    assert why is not None and "snapshots" in why
    # the snapshot layout only matters when the state moves in the process
    assert (
        compat.refusal("firewall", [1], schema("2", 1, (1,), snapshot=2), schema("1", 1, (1,)), False) is None
    )


@pytest.mark.parametrize(
    ("stderr", "field"),
    [
        ('nf: config: rules[0].action must be "allow" or "deny", not "bogus"\n', "config.rules[0].action"),
        ("nf: config: batch_size must be an integer in [1, 1024]\n", "config.batch_size"),
        ("nf: config: timeouts.tcp.established_ms must be ...", "config.timeouts.tcp.established_ms"),
        ("nf: config /tmp/x.json: must be a JSON object", "config"),
        ('nf: config: firewall config: unknown field "bogus" (allowed: rules, default)', "config.bogus"),
        ('nf: config: timeouts: unknown field "tcp" (allowed: tcp_syn_ms)', "config.timeouts.tcp"),
        ("nf: config: rules must be a list", "config.rules"),
    ],
)
def test_config_error_names_the_field(stderr, field):
    assert config_error(stderr).field == field


def test_update_body():
    assert validation.parse_update({"version": "0.2.0"}) == ("0.2.0", None, None)
    assert validation.parse_update({"binary": "/x/nf", "config": {}}) == (None, "/x/nf", {})
    for body, fld in [({}, "version"), ({"version": "a", "binary": "/b"}, "version"), ({"version": 3}, "version"),
                      ({"version": "a", "config": []}, "config"), ({"version": "a", "x": 1}, "x")]:  # fmt: skip
        with pytest.raises(ValidationError) as e:
            validation.parse_update(body)
        assert e.value.field == fld


def test_patch_body_takes_config_and_or_expected():
    assert validation.parse_nf_update({"config": {"rules": []}}) == {"config": {"rules": []}}
    assert validation.parse_nf_update({"expected": {"gbps": 1}, "config": {}}) == {
        "expected_gbps": 1.0,
        "config": {},
    }
    for body, fld in [({}, "body"), ({"config": 1}, "config"), ({"expected": {}}, "expected")]:
        with pytest.raises(ValidationError) as e:
            validation.parse_nf_update(body)
        assert e.value.field == fld


def test_a_layout_no_version_writes_is_forgotten_once_its_records_expired():
    day = 86_400.0
    v2, v3 = schema("2", 2, (1, 2)), schema("3", 3, (2, 3))
    layouts = compat.layouts_after("firewall", [1], v2)
    retired = compat.retire_after_roll("firewall", layouts, {}, v2, 5 * day, now=1000.0)
    assert (layouts, retired) == ([1, 2], {"1": [1000.0, 5 * day]})
    # v3 cannot read layout 1: refused while a record of it may be left, not after.
    before = compat.live_layouts(layouts, retired, now=1000.0 + 5 * day)
    assert before == [1, 2]
    assert "layout 1" in (compat.refusal("firewall", before, v3, v2, False) or "")
    after = compat.live_layouts(layouts, retired, now=1000.0 + 5 * day + compat.GRACE_S)
    assert after == [2]
    assert compat.refusal("firewall", after, v3, v2, False) is None
    # A longer timeout configured meanwhile keeps the old records (and so the layout) longer.
    longer = compat.stretch(retired, 10 * day)
    assert compat.live_layouts(layouts, longer, now=1000.0 + 6 * day) == [1, 2]


def test_a_rollback_makes_the_old_layout_live_again_and_retires_the_new_one():
    v1 = schema("1", 1, (0, 1, 2))  # a rollback target that reads the newer layout
    retired = {"1": [1000.0, 60.0]}
    got = compat.retire_after_roll("firewall", [1, 2], retired, v1, 60.0, now=2000.0)
    assert got == {"2": [2000.0, 60.0]}
    # The time a layout was retired stays when another roll does not write it either.
    v3 = schema("3", 3, (1, 2, 3))
    got = compat.retire_after_roll("firewall", [1, 2, 3], got, v3, 60.0, now=3000.0)
    assert got == {"2": [2000.0, 60.0], "1": [3000.0, 60.0]}


def test_records_without_a_known_lifetime_are_never_forgotten():
    v2 = schema("2", 2, (1, 2))
    assert compat.retire_after_roll("firewall", [1, 2], {"1": [0.0, 1.0]}, v2, None, now=10.0) == {}
    assert compat.stretch({"1": [0.0, 1.0]}, None) == {}
    assert compat.live_layouts([1, 2], {}, now=1e12) == [1, 2]


@pytest.mark.parametrize(
    ("stdout", "seconds"),
    [
        ('{"ok": true, "record_lifetime_ms": 432000000}', 432_000.0),
        ('{"ok": true, "record_lifetime_ms": null}', None),
        ('{"ok": true}', None),
        ("not json", None),
        ('{"ok": true, "record_lifetime_ms": true}', None),
    ],
)
def test_record_lifetime_from_check_config(stdout, seconds):
    assert record_lifetime_s(stdout) == seconds


def test_the_agent_drops_expired_layouts_from_the_nf_record():
    from types import SimpleNamespace

    from domain.model import Nf
    from nf_agent.update import Updates

    nf = Nf(id="fw", type="firewall", config={}, vport=200, expected_gbps=0.1, src=None, dst=None)
    nf.state_layouts, nf.layouts_retired = [1, 2], {"1": [1000.0, 60.0]}
    now = {"t": 1000.0 + 60.0 + compat.GRACE_S - 1}
    ups = Updates(SimpleNamespace(clock=lambda: now["t"]), None, None)  # type: ignore[arg-type]
    assert ups._written(nf, None) == [1, 2]
    now["t"] += 1
    assert ups._written(nf, None) == [2]
    assert (nf.state_layouts, nf.layouts_retired) == ([2], {})
