"""Request parsers never crash on arbitrary JSON (only ValidationError naming a field), the endpoint file
`uno status` reads, and the JSON log format."""

from __future__ import annotations

import json
import logging
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import ValidationError
from emulated_host import agent_endpoint
from nf_agent import validation
from nf_local.jsonlog import JsonFormatter

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "id",
        "type",
        "config",
        "expected",
        "pin",
        "hints",
        "to",
        "instances",
        "force",
        "gbps",
        "autoscale",
        "min",
        "max",
        "target_util",
    ]
)
NEAR = st.dictionaries(KEYS, JSON, max_size=6)  # bodies close to valid ones reach the deeper checks
LOCS = ["host", "snic0"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(JSON, NEAR))
def test_parsers_only_raise_validation_errors(body):
    for parse in (
        lambda b: validation.parse_nf(b, LOCS),
        validation.parse_nf_update,
        validation.parse_vm,
        lambda b: validation.parse_migrate(b, LOCS),
        validation.parse_scale,
        validation.parse_run,
    ):
        try:
            parse(body)
        except ValidationError as exc:
            assert exc.field and exc.message


def test_endpoint_entry(tmp_path):
    assert agent_endpoint.status_entry(tmp_path) is None
    agent_endpoint.write(tmp_path, "http://127.0.0.1:1234", os.getpid())
    (tmp_path / "agent" / "state.json").write_text(json.dumps({"nfs": {"fw1": {"location": "snic0"}}}))
    assert agent_endpoint.status_entry(tmp_path) == {
        "rest": "http://127.0.0.1:1234",
        "pid": os.getpid(),
        "running": True,
        "nfs": {"fw1": "snic0"},
    }
    agent_endpoint.remove(tmp_path)
    assert agent_endpoint.status_entry(tmp_path) is None


def test_json_log_lines():
    rec = logging.LogRecord("uno.agent", logging.INFO, __file__, 1, "nf-create", None, None)
    rec.fields = {"nf": "fw1", "location": "host"}
    line = json.loads(JsonFormatter().format(rec))
    assert line["msg"] == "nf-create" and line["nf"] == "fw1" and line["level"] == "info"
    assert line["ts"].endswith("Z")
