// Unit tests of the web view's data-to-drawing code (nf_agent/ui_static/model.js, svg.js): `node --test tests/ui/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Series, border, charts, chainArrows, errorText, ethSnic, hostLayout, mergeEvents, nfPlacements, nfRows, pcieBars, rateLabel,
  sampleOf, timeLabel, timelineRows,
} from "../../nf_agent/ui_static/model.js";
import { chartSvg, esc, hostSvg, pcieSvg, yRange } from "../../nf_agent/ui_static/svg.js";

const HOST = {
  locations: ["host", "snic0", "snic1"],
  snics: [
    { id: "snic0", capacity: 36, pcie_gbps: 40, eth_ports: 1, down: false },
    { id: "snic1", capacity: 36, pcie_gbps: 40, eth_ports: 2, down: true },
  ],
  vms: ["web"],
  t: 10,
};
const inst = (id, location, state = "running") => ({ id, location, state, restarts: 0 });
const NFS = [
  { id: "fw1", type: "firewall", location: "snic0", instances: [inst("fw1-1", "snic0")] },
  { id: "ips", type: "ips", location: "host", instances: [inst("ips-2", "host"), inst("ips-3", "snic0")] },
  { id: "nat", type: "nat", location: "host", instances: [inst("nat-4", "host"), inst("nat-5", "host")] },
];

function inside(node, box) {
  return node.x >= box.x && node.y >= box.y && node.x + node.w <= box.x + box.w && node.y + node.h <= box.y + box.h;
}

test("each NF is drawn inside the box of the location its instances run at", () => {
  const l = hostLayout(HOST, NFS, []);
  const box = Object.fromEntries(l.boxes.map((b) => [b.id, b]));
  const nodes = Object.fromEntries(l.nodes.map((n) => [n.id, n]));
  assert.ok(inside(nodes.fw1, box.snic0));
  assert.equal(nodes.fw1.loc, "snic0");
  assert.ok(inside(nodes.nat, box.host));
  assert.equal(nodes.nat.label, "nat ×2");
  // a split NF is one node per location, named like the graph's split vertices
  assert.ok(inside(nodes["ips@host"], box.host));
  assert.ok(inside(nodes["ips@snic0"], box.snic0));
  assert.equal(nodes.ips, undefined);
  assert.ok(inside(nodes.web, box.host));
  assert.ok(inside(nodes["snic1-eth1"], box.snic1));
  assert.ok(box.snic1.down && box.snic1.label.includes("down"));
});

test("no two nodes overlap, also with 100 NFs", () => {
  const many = Array.from({ length: 100 }, (_, i) => ({
    id: `nf${i}`, type: "firewall", location: i % 3 ? "host" : "snic0", instances: [inst(`i${i}`, i % 3 ? "host" : "snic0")],
  }));
  const l = hostLayout(HOST, many, []);
  const nodes = l.nodes;
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) {
      const a = nodes[i];
      const b = nodes[j];
      const apart = a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y;
      assert.ok(apart, `${a.id} overlaps ${b.id}`);
    }
  }
  for (const n of nodes) assert.ok(n.y + n.h <= l.height && n.x + n.w <= l.width, `${n.id} outside the picture`);
});

test("chain arrows join the drawn vertices and carry the measured rate", () => {
  const l = hostLayout(HOST, NFS, [
    { src: "snic0-eth0", dst: "fw1", gbps: 2.5 },
    { src: "fw1", dst: "web", gbps: 0.0123 },
    { src: "gone", dst: "web", gbps: 1 },
  ]);
  assert.equal(l.arrows.length, 2);
  const [a, b] = l.arrows;
  assert.equal(a.label, "2.50 Gb/s");
  assert.equal(b.label, "12.3 Mb/s");
  // arrows end on the nodes' borders, not under them
  const fw = l.nodes.find((n) => n.id === "fw1");
  const eth = l.nodes.find((n) => n.id === "snic0-eth0");
  const onBorder = (n, x, y) =>
    (Math.abs(x - n.x) < 1e-9 || Math.abs(x - n.x - n.w) < 1e-9) && y >= n.y && y <= n.y + n.h ||
    (Math.abs(y - n.y) < 1e-9 || Math.abs(y - n.y - n.h) < 1e-9) && x >= n.x && x <= n.x + n.w;
  assert.ok(onBorder(fw, a.x2, a.y2), `${a.x2},${a.y2}`);
  assert.ok(onBorder(eth, a.x1, a.y1), `${a.x1},${a.y1}`);
  assert.deepEqual(chainArrows([], [{ src: "a", dst: "b", gbps: 1 }]), []);
});

test("border points and time labels", () => {
  const n = { x: 0, y: 0, w: 10, h: 4 };
  assert.deepEqual(border(n, 100, 2), [10, 2]);
  assert.deepEqual(border(n, 5, -50), [5, 0]);
  assert.deepEqual(border(n, 5, 2), [5, 2]);
  assert.equal(timeLabel(12.34), "12.3");
  assert.match(timeLabel(1795910721.5), /^\d\d:\d\d:\d\d$/);
});

test("rate labels", () => {
  assert.equal(rateLabel(12.345), "12.3 Gb/s");
  assert.equal(rateLabel(0), "0");
  assert.equal(rateLabel(Number.NaN), "");
  assert.equal(ethSnic("snic3-eth0"), "snic3");
  assert.equal(ethSnic("fw1"), null);
});

test("nfPlacements groups instances by location", () => {
  const p = nfPlacements(NFS);
  assert.deepEqual(p.map((x) => `${x.nf}@${x.loc}:${x.instances}:${x.split}`),
    ["fw1@snic0:1:false", "ips@host:1:true", "ips@snic0:1:true", "nat@host:2:false"]);
});

const PLACEMENT = {
  predicted: { host_cores: 1.5, all_host_cores: 4, snic_load: { snic0: 9, snic1: 0 }, pcie_gbps: { snic0: { up: 1, down: 2 } } },
  measured: { t: 11, cpu_cores: { host: 1.2, snic0: 0.3 }, pcie_gbps: { snic0: { up: 0.5, down: 44 } },
    nf_load_gbps: { fw1: 0.5 }, nf_pps: { fw1: 1234.4 }, edges: [] },
};

test("a sample has host CPU predicted/measured/all-on-host, PCIe and sNIC use", () => {
  const v = sampleOf(PLACEMENT, HOST);
  assert.deepEqual(v, {
    "cpu/predicted": 1.5, "cpu/measured": 1.2, "cpu/all on host": 4,
    "pcie-snic0/up": 0.5, "pcie-snic0/down": 44, "snic/snic0": 25, "snic/snic1": 0,
  });
  assert.deepEqual(sampleOf({ predicted: null, measured: null }, HOST), {});
});

test("Series keeps aligned lines, skips repeated samples and stays bounded", () => {
  const s = new Series(3);
  assert.ok(s.push(1, { "cpu/a": 1 }));
  assert.ok(!s.push(1, { "cpu/a": 9 }));
  s.push(2, { "cpu/a": 2, "cpu/b": 5 });
  s.push(3, { "cpu/b": 6 });
  s.push(4, { "cpu/a": 4 });
  assert.deepEqual(s.t, [2, 3, 4]);
  assert.deepEqual(s.lines.get("cpu/a"), [2, null, 4]);
  assert.deepEqual(s.lines.get("cpu/b"), [5, 6, null]);
  assert.deepEqual(Object.keys(charts(s).cpu.lines), ["a", "b"]);
});

test("PCIe bars: measured against the budget, the predicted figure where nothing is measured", () => {
  const bars = pcieBars(PLACEMENT, HOST);
  const b = Object.fromEntries(bars.map((x) => [`${x.snic}/${x.dir}`, x]));
  assert.equal(b["snic0/down"].gbps, 44);
  assert.equal(b["snic0/down"].frac, 1.1);
  assert.equal(b["snic1/up"].gbps, 0);
  const onlyPred = pcieBars({ predicted: PLACEMENT.predicted, measured: null }, HOST);
  assert.equal(onlyPred[1].gbps, 2);
  const svg = pcieSvg(bars);
  assert.match(svg, /data-pcie="snic0-down"/);
  assert.match(svg, /class="bar hot"/); // over 90 % of the budget
});

test("timeline rows: newest first, moves with from/to and remap ms, placement runs with why", () => {
  const rows = timelineRows([
    { t: 1, event: "placement-run", go: true, why: "saves 1.2 cores", moves: [{ nf: "fw1", from: "host", to: "snic0" }] },
    { t: 2, event: "nf-migrate", nf: "fw1", src: "host", dst: "snic0", remap_ms: 1.234, duration_ms: 55.55 },
    { t: 3, event: "nf-failover", nf: "fw1", reason: "snic-dead", remap_ms: 2 },
    { t: 4, event: "nf-migrate-failed", nf: "fw1", dst: "snic1", step: "start", steps: [] },
  ]);
  assert.deepEqual(rows.map((r) => r.kind), ["move", "failover", "move", "placement"]);
  assert.equal(rows[2].title, "fw1 moved host → snic0");
  assert.equal(rows[2].detail, "remap 1.23 ms, move 55.5 ms");
  assert.equal(rows[3].title, "placement run: moved fw1 host→snic0");
  assert.equal(rows[3].detail, "saves 1.2 cores");
  assert.equal(rows[1].detail, "reason=snic-dead remap_ms=2");
  assert.equal(rows[0].title, "fw1 move to snic1 failed at start");
});

test("events merge without duplicates when polls overlap", () => {
  const a = { t: 1, event: "vm-create" };
  const b = { t: 2, event: "nf-create" };
  const c = { t: 3, event: "nf-migrate" };
  let held = mergeEvents([], [a, b]);
  held = mergeEvents(held, [a, b]); // a second poll answered with the same events
  held = mergeEvents(held, [c]);
  assert.deepEqual(held, [a, b, c]);
  assert.deepEqual(mergeEvents(held, [], 2), [b, c]);
  assert.deepEqual(mergeEvents([], []), []);
});

test("NF rows: sorted, location(s), health, load and packets/s", () => {
  const rows = nfRows(NFS, PLACEMENT, { nfs: { fw1: "healthy", ips: "degraded" } });
  assert.deepEqual(rows.map((r) => r.id), ["fw1", "ips", "nat"]);
  assert.equal(rows[0].load, "500 Mb/s");
  assert.equal(rows[0].pps, "1234");
  assert.equal(rows[1].location, "host+snic0");
  assert.equal(rows[1].health, "degraded");
  assert.equal(rows[2].health, "?");
  assert.equal(rows[2].pps, "-");
});

test("errors are shown as the API gives them", () => {
  assert.equal(errorText(409, { error: "fw1 is pinned", field: "to" }), "409 fw1 is pinned (field to)");
  assert.equal(errorText(502, "Bad Gateway"), "502 Bad Gateway");
});

test("SVG output escapes ids and draws every node, arrow and line", () => {
  const l = hostLayout({ ...HOST, vms: ["<b>"] }, NFS, [{ src: "fw1", dst: "<b>", gbps: 1 }]);
  const svg = hostSvg(l);
  assert.ok(!svg.includes("<b>"));
  assert.equal((svg.match(/class="node /g) || []).length, l.nodes.length);
  assert.equal((svg.match(/class="arrow"/g) || []).length, 1);
  assert.match(svg, /data-nf="fw1" data-loc="snic0"/);
  const c = chartSvg("cpu", { a: [1, null, 3], b: [2, 2, 2] }, { limit: 10, limitLabel: "budget" });
  assert.equal((c.match(/<polyline/g) || []).length, 3); // a's gap splits it in two
  assert.match(c, /class="limit"/);
  assert.match(chartSvg("cpu", { a: [1] }, { span: "10:00:00 – 10:05:00" }), /10:00:00 – 10:05:00/);
  assert.deepEqual(yRange({ a: [0, 0] }), [0, 1.05]);
  assert.equal(esc(`a"<&>'`), "a&quot;&lt;&amp;&gt;&#39;");
});
