"""The web view in a real headless browser (Debian's Chromium through Selenium) against `uno agent serve` on an
emulated host with OneSwitch and real NF processes: the page logs in with the agent's token, draws each NF
where the REST API says it runs, a migration started from the page moves the NF (REST confirms) and the page
redraws it, an API error is shown as the API gives it. The screenshot is saved under build/ui/ (gitignored).
Also: every metric the Grafana dashboard (docs/grafana/uno-dashboard.json) queries is in the real /metrics of
the agent or OneSwitch."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from testkit.agent_host import AGENT_E2E, FW_CONFIG, agent_host
from testkit.browser import browser_missing_reason, chromium
from testkit.poll import wait

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "build" / "ui"
DASHBOARD = REPO / "docs" / "grafana" / "uno-dashboard.json"
TOKEN = "ui-test-token-0123"
reason = browser_missing_reason()
pytestmark = [*AGENT_E2E, pytest.mark.skipif(bool(reason), reason=reason or "")]


def api(url: str, method: str, path: str, body=None) -> tuple[int, dict | str]:
    req = urllib.request.Request(
        url + path, data=None if body is None else json.dumps(body).encode(), method=method
    )
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", f"Bearer {TOKEN}")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read().decode()
            return r.status, json.loads(raw) if r.headers.get_content_type() == "application/json" else raw
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ui")
    (tmp / "token").write_text(TOKEN)
    # a patient sNIC watch: on a loaded machine the default 40 ms without a heartbeat declares the sNIC dead
    # and fails its NFs over mid-test; what this module checks is the page, not the failure detector
    args = ("--token-file", str(tmp / "token"), "--snic-timeout-ms", "3000")
    with agent_host(tmp, agent_args=args) as (host, status, agent, url):
        assert api(url, "POST", "/v1/vms", {"id": "web"})[0] == 201
        for nf_id in ("fw1", "fw2"):
            code, body = api(url, "POST", "/v1/nfs", {"type": "firewall", "id": nf_id, "config": FW_CONFIG,
                                                      "expected": {"gbps": 0.5, "dst": "web"}})  # fmt: skip
            assert code == 201, body
        yield host, status, url, tmp


def node_loc(driver, nf_id: str) -> str | None:
    return driver.execute_script(
        "const n = document.querySelector(`g.node-nf[data-nf='${arguments[0]}']`); return n && n.dataset.loc;",
        nf_id,
    )


def inside_box(driver, nf_id: str, loc: str) -> bool:
    """The NF's node lies within the drawn box of `loc` on the page (by the browser's own layout)."""
    return driver.execute_script(
        """const n = document.querySelector(`g.node-nf[data-nf='${arguments[0]}'] rect`).getBoundingClientRect();
        const b = document.querySelector(`g[data-box='${arguments[1]}'] rect`).getBoundingClientRect();
        return n.left >= b.left && n.right <= b.right && n.top >= b.top && n.bottom <= b.bottom;""",
        nf_id,
        loc,
    )


def test_page_draws_nfs_where_rest_says_and_migrates_from_the_page(env):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    host, status, url, tmp = env
    with chromium("uno-wv-") as d:
        d.get(url + "/ui/")
        # no token yet: the API's 401 brings up the login form; the token goes to this tab's sessionStorage
        wait(lambda: d.find_element(By.ID, "login").is_displayed(), 30, "login form")
        d.find_element(By.ID, "token").send_keys(TOKEN)
        d.find_element(By.CSS_SELECTOR, "#login button").click()
        wait(lambda: node_loc(d, "fw1") and node_loc(d, "fw2"), 30, "the NFs drawn")
        code, nfs = api(url, "GET", "/v1/nfs")
        assert code == 200
        where = {n["id"]: n["location"] for n in nfs}
        for nf_id, loc in where.items():
            assert node_loc(d, nf_id) == loc
            assert inside_box(d, nf_id, loc)
            row = d.find_element(By.CSS_SELECTOR, f"tr[data-nf='{nf_id}']")
            assert row.find_element(By.CSS_SELECTOR, "[data-col=location]").text == loc
        wait(lambda: d.execute_script("return window.unoView.polls") >= 2, 30, "two polls")
        assert d.execute_script("return window.unoView.error") is None

        # migrate fw1 from the page: REST confirms and the page redraws it in the other box
        src = where["fw1"]
        dst = "host" if src != "host" else "snic0"
        row = d.find_element(By.CSS_SELECTOR, "tr[data-nf='fw1']")
        Select(row.find_element(By.TAG_NAME, "select")).select_by_visible_text(dst)
        row.find_element(By.CSS_SELECTOR, "button[data-act=migrate]").click()
        wait(lambda: api(url, "GET", "/v1/nfs/fw1")[1]["location"] == dst, 120, "REST: fw1 moved")
        wait(lambda: node_loc(d, "fw1") == dst, 30, "the page redraws fw1 at its new place")
        assert inside_box(d, "fw1", dst)
        assert node_loc(d, "fw2") == where["fw2"]
        result = d.find_element(By.ID, "action-result")
        wait(lambda: "ok" in result.get_attribute("class"), 30, "the action's answer")
        wait(
            lambda: f"fw1 moved {src} → {dst}" in d.find_element(By.ID, "timeline").text,
            30,
            "the move on the timeline",
        )

        # every recorded event once (the login's poll and the timer's overlap)
        wait(
            lambda: (
                len(d.find_elements(By.CSS_SELECTOR, "#timeline li"))
                == len(api(url, "GET", "/v1/events")[1]["events"])
            ),
            30,
            "one timeline row per event",
        )

        # an error is shown as the API gives it: status, message and field
        row = d.find_element(By.CSS_SELECTOR, "tr[data-nf='fw2']")
        box = row.find_element(By.CSS_SELECTOR, "input[type=number]")
        box.clear()
        box.send_keys("0")
        row.find_element(By.CSS_SELECTOR, "button[data-act=scale]").click()
        code, err = api(url, "POST", "/v1/nfs/fw2/scale", {"instances": 0})
        assert code == 400
        wait(lambda: "error" in result.get_attribute("class"), 30, "the error shown")
        assert result.text == f"scale fw2: 400 {err['error']} (field {err['field']})"
        assert api(url, "GET", "/v1/nfs/fw2")[1]["location"] == where["fw2"]  # nothing changed

        # the charts and PCIe bars are drawn from the live figures
        wait(lambda: d.find_elements(By.CSS_SELECTOR, "#charts svg.chart"), 30, "charts")
        assert d.find_elements(By.CSS_SELECTOR, "#pcie [data-pcie='snic0-up']")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "web-view.png"
        assert d.save_screenshot(str(shot))
        (tmp / "web-view.png").write_bytes(shot.read_bytes())
        assert shot.stat().st_size > 10_000


METRIC = re.compile(r"\b((?:uno_agent|oneswitch)_[a-zA-Z0-9_]+)")


def dashboard_metrics() -> set[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs
    return {m for e in exprs for m in METRIC.findall(e)}


def exported(text: str) -> set[str]:
    """Metric names with at least one sample in a Prometheus text exposition."""
    return {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")
    }


def test_every_dashboard_metric_is_exported(env):
    _, status, url, _ = env
    wanted = dashboard_metrics()

    last: dict[str, set[str]] = {}

    def all_there() -> bool:
        code, agent_text = api(url, "GET", "/metrics")
        assert code == 200
        with urllib.request.urlopen(status["oneswitch"]["rest"] + "/metrics", timeout=30) as r:
            switch_text = r.read().decode()
        last["missing"] = wanted - exported(agent_text) - exported(switch_text)
        return not last["missing"]

    # the measured families appear with the monitor's first measurement
    try:
        wait(all_there, 30, "every dashboard metric", interval=1)
    except AssertionError:
        pytest.fail(f"the dashboard queries metrics nobody exports: {sorted(last['missing'])}")
    assert "uno_agent_predicted_all_host_cores" in wanted and "oneswitch_remaps_total" in wanted
