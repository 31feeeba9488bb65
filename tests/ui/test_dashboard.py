"""The Grafana dashboard's JSON (no root): importable shape (one Prometheus input that every query uses,
unique panel ids, panels on the 24-column grid) and queries over the agent's and OneSwitch's metric
prefixes only. That each metric exists in the real /metrics: tests/ui/test_browser.py."""

from __future__ import annotations

import json

from tests.ui.test_browser import DASHBOARD, dashboard_metrics


def test_dashboard_is_importable():
    dash = json.loads(DASHBOARD.read_text())
    assert [i["name"] for i in dash["__inputs"]] == ["DS_PROMETHEUS"]
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${DS_PROMETHEUS}" and t["expr"].strip(), p["title"]
    names = dashboard_metrics()
    assert any(n.startswith("uno_agent_") for n in names) and any(n.startswith("oneswitch_") for n in names)
