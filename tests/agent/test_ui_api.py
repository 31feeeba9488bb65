"""The web view's server side (fast, no root): the page's files are open and served from the package, the
feeds it reads (/v1/host, /v1/events) follow the token rule and the spec, bad `since` is one 400 naming the
field, and the placement view predicts the all-on-host cost. The NF runtime and OneSwitch are fakes here; the
page itself runs in a real browser in tests/ui/test_browser.py."""

from __future__ import annotations

import json

import pytest

from nf_agent.api import create_app
from nf_agent.openapi import spec
from nf_agent.ui import STATIC, is_open
from testkit.fakes import make_agent

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def env(tmp_path):
    agent, rt, mp, clock = make_agent(tmp_path)
    return agent, clock, create_app(agent, token=TOKEN).test_client()


def post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json", headers=AUTH)


def test_page_files_are_open_and_data_needs_the_token(env):
    _, _, c = env
    assert c.get("/ui").status_code == 302
    r = c.get("/ui/")
    assert r.status_code == 200 and b'<script type="module" src="app.js">' in r.data
    for name in ("app.js", "model.js", "svg.js"):
        r = c.get(f"/ui/{name}")
        assert r.status_code == 200 and "javascript" in r.mimetype, name
    assert c.get("/ui/style.css").mimetype == "text/css"
    assert c.get("/ui/nope.js").status_code == 404
    assert c.get("/ui/../api.py").status_code == 404  # nothing outside the page's folder
    for path in ("/v1/host", "/v1/events", "/v1/nfs", "/metrics"):
        r = c.get(path)
        assert r.status_code == 401 and r.get_json()["field"] == "Authorization", path
    assert is_open("/ui") and is_open("/ui/app.js") and not is_open("/uix") and not is_open("/v1/ui")


def test_every_page_file_is_in_the_package_folder():
    names = {p.name for p in STATIC.iterdir()}
    assert {"index.html", "app.js", "model.js", "svg.js", "style.css"} <= names
    html = (STATIC / "index.html").read_text()
    assert "http://" not in html and "https://" not in html  # no CDN: it must work with no internet


def test_host_view_names_snics_with_budgets_and_vms(env):
    agent, _, c = env
    assert post(c, "/v1/vms", {"id": "web"}).status_code == 201
    body = c.get("/v1/host", headers=AUTH).get_json()
    assert body["locations"] == ["host", "snic0"]
    assert body["snics"] == [
        {"id": "snic0", "capacity": 36.0, "pcie_gbps": 40.0, "eth_ports": 1, "down": False}
    ]
    assert body["vms"] == ["web"]
    agent.ctx.down.add("snic0")
    assert c.get("/v1/host", headers=AUTH).get_json()["snics"][0]["down"] is True


def test_events_feed_and_since(env):
    _, clock, c = env
    assert post(c, "/v1/vms", {"id": "web"}).status_code == 201
    clock.sleep(5)
    assert post(c, "/v1/nfs", {"type": "firewall", "id": "fw1"}).status_code == 201
    events = c.get("/v1/events", headers=AUTH).get_json()["events"]
    assert [e["event"] for e in events][:2] == ["vm-create", "nf-create"]
    t0 = events[0]["t"]
    later = c.get(f"/v1/events?since={t0}", headers=AUTH).get_json()["events"]
    assert "vm-create" not in [e["event"] for e in later] and later[0]["event"] == "nf-create"
    src = c.get("/v1/nfs/fw1", headers=AUTH).get_json()["location"]
    dst = "host" if src != "host" else "snic0"
    r = post(c, "/v1/nfs/fw1/migrate", {"to": dst})
    assert r.status_code == 200 and r.get_json()["moved"], r.get_json()
    moves = [
        e
        for e in c.get(f"/v1/events?since={t0}", headers=AUTH).get_json()["events"]
        if e["event"] == "nf-migrate"
    ]
    assert moves and moves[-1]["src"] == src and moves[-1]["dst"] == dst and "remap_ms" in moves[-1]


@pytest.mark.parametrize("bad", ["x", "nan", "inf", "", "1&since=2", "1&sincee=2"])
def test_bad_since_is_one_400_naming_the_field(env, bad):
    _, _, c = env
    r = c.get(f"/v1/events?since={bad}", headers=AUTH)
    assert r.status_code == 400 and r.get_json()["field"] in ("since", "sincee")


def test_all_on_host_prediction_is_at_least_the_placed_one(env):
    _, _, c = env
    assert post(c, "/v1/vms", {"id": "web"}).status_code == 201
    r = post(c, "/v1/nfs", {"type": "firewall", "id": "fw1", "expected": {"gbps": 2, "dst": "web"}})
    assert r.status_code == 201
    pred = c.get("/v1/placement", headers=AUTH).get_json()["predicted"]
    assert pred["all_host_cores"] > 0
    assert pred["all_host_cores"] >= pred["host_cores"]


def test_spec_documents_the_feeds():
    s = spec()
    assert "get" in s["paths"]["/v1/host"] and "get" in s["paths"]["/v1/events"]
    assert (
        "all_host_cores" in s["components"]["schemas"]["Placement"]["properties"]["predicted"]["properties"]
    )
