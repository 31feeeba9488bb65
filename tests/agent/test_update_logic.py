"""The live update's pure decisions: which version may take over an NF's state (nf_agent.compat), how an nf
config refusal names its field (nf_local.versions.config_error), and the request bodies (validation)."""

from __future__ import annotations

import pytest

from domain.errors import ValidationError
from nf_agent import compat, validation
from nf_local.versions import NfSchema, config_error


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
