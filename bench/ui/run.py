"""The web view's redraw time with 10 and 100 NFs, side by side in one run: a fake-edged agent (testkit.fakes:
no NF processes, no OneSwitch; the REST API and the page are the real ones) serves /ui on loopback, headless
Chromium polls it at 1 s, and the page's own clock (`window.unoView.lastRedrawMs`: layout, SVG, table,
charts and the browser's style/layout of the result) is read after each poll. Two cases per NF count: the
host picture unchanged since the last poll (the page then skips re-inserting it) and the picture re-inserted
at every poll (the bench clears the page's last-drawn key: what a move or a rate change costs). Prints
JSON: per case the median and max redraw ms over the samples, the median poll round trip, and the ratios
100/10; the last line is the figures as one JSON line.

    ./uno bench ui [--quick] [--samples 15]     (or: .venv/bin/python -m bench.ui.run)
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from werkzeug.serving import make_server

from nf_agent.api import create_app
from testkit.browser import browser_missing_reason, chromium
from testkit.fakes import make_agent

NF_TYPES = ("firewall", "nat", "ips", "lb")


def fake_host(tmp: Path, n: int):
    """A fake-edged agent with two VMs and `n` NFs in chains of four (web -> 4 NFs -> app), placed by the
    real solver (the sNIC's default capacity: part of them lands on the host)."""
    agent, rt, mp, clock = make_agent(tmp)
    app = create_app(agent)
    c = app.test_client()
    for vm in ("web", "app"):
        assert c.post("/v1/vms", json={"id": vm}).status_code == 201
    for i in range(n):
        body = {"type": NF_TYPES[i % 4], "id": f"nf{i}", "expected": {"gbps": 0.1 + (i % 7) / 10}}
        r = c.post("/v1/nfs", json=body)
        assert r.status_code == 201, r.get_json()
    # the chains, once every NF exists (a neighbour must exist when named)
    for i in range(n):
        last = i % 4 == 3 or i == n - 1
        chain = {"src": "web" if i % 4 == 0 else f"nf{i - 1}", "dst": "app" if last else f"nf{i + 1}"}
        r = c.patch(f"/v1/nfs/nf{i}", json={"expected": chain})
        assert r.status_code == 200, r.get_json()
    return agent, app


def measure(app, samples: int, repaint: bool, shot: Path | None = None) -> dict:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with chromium("uno-wv-bench-") as d:
            d.get(f"http://127.0.0.1:{server.server_port}/ui/")
            redraw, rtt = [], []
            seen = 0
            deadline = time.monotonic() + samples * 3 + 30
            while len(redraw) < samples and time.monotonic() < deadline:
                v = d.execute_script("return window.unoView")
                if v["error"]:
                    raise RuntimeError(v["error"])
                if v["redraws"] > seen:
                    seen = v["redraws"]
                    if seen > 2:  # the first draws build the table rows and warm the JIT
                        redraw.append(v["lastRedrawMs"])
                        rtt.append(v["lastPollMs"])
                    if repaint:
                        d.execute_script("window.unoView.hostKey = ''")
                time.sleep(0.2)
            if shot is not None:
                d.set_window_size(1600, 2400)
                d.save_screenshot(str(shot))
            nodes = d.execute_script("return document.querySelectorAll('g.node-nf').length")
            rows = d.execute_script("return document.querySelectorAll('#nf-rows tr').length")
    finally:
        server.shutdown()
        thread.join()
    return {
        "samples": len(redraw),
        "redraw_ms_median": round(statistics.median(redraw), 2),
        "redraw_ms_max": round(max(redraw), 2),
        "poll_ms_median": round(statistics.median(rtt), 1),
        "nf_nodes": nodes,
        "table_rows": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="5 samples per case")
    ap.add_argument("--screenshot", type=Path, help="save the 100-NF page as this PNG")
    args = ap.parse_args()
    if args.quick:
        args.samples = 5
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    reason = browser_missing_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    out: dict = {}
    for n in (10, 100):
        with tempfile.TemporaryDirectory(prefix="uno-wv-bench-") as tmp:
            t0 = time.monotonic()
            _, app = fake_host(Path(tmp), n)
            setup_s = round(time.monotonic() - t0, 1)
            for case, repaint in (("unchanged", False), ("repainted", True)):
                shot = args.screenshot if n == 100 and repaint else None
                out[f"{n}/{case}"] = measure(app, args.samples, repaint, shot) | {"setup_s": setup_s}
                print(f"[{n} NFs, picture {case}] {json.dumps(out[f'{n}/{case}'])}", file=sys.stderr)
    for case in ("unchanged", "repainted"):
        out[f"ratio_100_vs_10/{case}"] = round(
            out[f"100/{case}"]["redraw_ms_median"] / out[f"10/{case}"]["redraw_ms_median"], 2
        )
    print(json.dumps(out, indent=2), file=sys.stderr)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
