// Data to drawing: pure functions from the agent's REST answers to what the page draws (boxes, nodes,
// arrows, chart series, timeline rows, NF rows). No DOM, no fetch: unit-tested under node (tests/ui/).

export const HOST = "host";
const SPLIT_SEP = "@";
const BOX_W = 430;
const GAP = 40;
const CELL_W = 100;
const CELL_H = 40;
const NODE_W = 86;
const NODE_H = 26;
const HEAD = 30;

/** "snic0-eth1" -> "snic0" (a wire port's sNIC), else null. */
export function ethSnic(vertex) {
  const m = /^(snic\d+)-eth\d+$/.exec(vertex);
  return m ? m[1] : null;
}

/** Every place an NF runs: one node per (NF, location) with its instances there. */
export function nfPlacements(nfs) {
  const out = [];
  for (const nf of nfs) {
    const byLoc = new Map();
    for (const inst of nf.instances || []) {
      if (!byLoc.has(inst.location)) byLoc.set(inst.location, []);
      byLoc.get(inst.location).push(inst);
    }
    if (byLoc.size === 0 && nf.location) byLoc.set(nf.location, []);
    for (const [loc, insts] of byLoc) {
      out.push({ nf: nf.id, type: nf.type, loc, instances: insts.length, split: byLoc.size > 1 });
    }
  }
  return out;
}

function grid(items, x0, y0, width) {
  const cols = Math.max(1, Math.floor((width - 10) / CELL_W));
  items.forEach((it, i) => {
    it.x = x0 + 10 + (i % cols) * CELL_W;
    it.y = y0 + HEAD + Math.floor(i / cols) * CELL_H;
    it.w = NODE_W;
    it.h = NODE_H;
  });
  const rows = Math.max(1, Math.ceil(items.length / cols));
  return HEAD + rows * CELL_H + 6;
}

/**
 * The host drawn as boxes: the host CPU (its VMs, then the NFs placed there) on the left, each sNIC on the
 * right (its NFs, then its wire ports). Returns {width, height, boxes, nodes, arrows}; node ids are graph
 * vertices (VM id, NF id or `ID@LOC` for a split NF, `snicK-ethJ`), so measured edges find their ends.
 */
export function hostLayout(host, nfs, edges) {
  const placements = nfPlacements(nfs);
  const nodes = [];
  const boxes = [];
  const hostItems = [
    ...host.vms.map((vm) => ({ id: vm, kind: "vm", label: vm, loc: HOST })),
    ...placements.filter((p) => p.loc === HOST).map((p) => nfNode(p)),
  ];
  const hostH = grid(hostItems, 0, 0, BOX_W);
  nodes.push(...hostItems);
  let y = 0;
  const snicBoxes = [];
  for (const s of host.snics) {
    const items = placements.filter((p) => p.loc === s.id).map((p) => nfNode(p));
    for (let j = 0; j < s.eth_ports; j++) {
      const id = `${s.id}-eth${j}`;
      items.push({ id, kind: "port", label: `eth${j}`, loc: s.id });
    }
    const h = grid(items, BOX_W + GAP, y, BOX_W);
    snicBoxes.push({ id: s.id, kind: "snic", label: s.id + (s.down ? " (down)" : ""), down: !!s.down,
      x: BOX_W + GAP, y, w: BOX_W, h });
    nodes.push(...items);
    y += h + 12;
  }
  // NFs at a location the host config does not list (should not happen): still drawn, in the host box
  const known = new Set([HOST, ...host.snics.map((s) => s.id)]);
  const stray = placements.filter((p) => !known.has(p.loc)).map((p) => nfNode(p));
  let hostHeight = hostH;
  if (stray.length) {
    hostHeight += grid(stray, 0, hostH, BOX_W) - HEAD;
    nodes.push(...stray);
  }
  boxes.push({ id: HOST, kind: "host", label: "host CPU", x: 0, y: 0, w: BOX_W, h: hostHeight });
  boxes.push(...snicBoxes);
  const height = Math.max(hostHeight, y) + 4;
  return { width: 2 * BOX_W + GAP, height, boxes, nodes, arrows: chainArrows(nodes, edges || []) };
}

function nfNode(p) {
  const id = p.split ? `${p.nf}${SPLIT_SEP}${p.loc}` : p.nf;
  const label = p.instances > 1 ? `${p.nf} ×${p.instances}` : p.nf;
  return { id, kind: "nf", nf: p.nf, type: p.type, label, loc: p.loc, instances: p.instances };
}

/** Gbit/s as a short label: 3 significant figures, Mbit/s below 1 Gbit/s. */
export function rateLabel(gbps) {
  if (!Number.isFinite(gbps)) return "";
  if (gbps >= 1) return `${gbps.toPrecision(3)} Gb/s`;
  const mbps = gbps * 1000;
  if (mbps >= 0.01) return `${mbps.toPrecision(3)} Mb/s`;
  return "0";
}

/** Chain edges as arrows between node centres (edges whose ends are not drawn are left out). */
export function chainArrows(nodes, edges) {
  const at = new Map(nodes.map((n) => [n.id, n]));
  const out = [];
  for (const e of edges) {
    const a = at.get(e.src);
    const b = at.get(e.dst);
    if (!a || !b) continue;
    const [x1, y1] = border(a, b.x + b.w / 2, b.y + b.h / 2);
    const [x2, y2] = border(b, a.x + a.w / 2, a.y + a.h / 2);
    out.push({ src: e.src, dst: e.dst, gbps: e.gbps, label: rateLabel(e.gbps), x1, y1, x2, y2 });
  }
  return out;
}

/** Where the line from the centre of node `n` towards (tx, ty) leaves the node's rectangle. */
export function border(n, tx, ty) {
  const cx = n.x + n.w / 2;
  const cy = n.y + n.h / 2;
  const dx = tx - cx;
  const dy = ty - cy;
  if (dx === 0 && dy === 0) return [cx, cy];
  const k = Math.min(dx ? n.w / 2 / Math.abs(dx) : Infinity, dy ? n.h / 2 / Math.abs(dy) : Infinity);
  return [cx + dx * k, cy + dy * k];
}

/** An event's time: the agent's clock is Unix time, shown as the local time of day; a small clock value
 *  (a test's clock) as seconds. */
export function timeLabel(t) {
  if (t > 1e9) return new Date(t * 1000).toLocaleTimeString("en-GB", { hour12: false });
  return t.toFixed(1);
}

/** A bounded series store: push one sample per poll, keep the newest `max`. */
export class Series {
  constructor(max = 300) {
    this.max = max;
    this.t = [];
    this.lines = new Map();
  }

  push(t, values) {
    if (this.t.length && t <= this.t[this.t.length - 1]) return false; // the same sample again
    this.t.push(t);
    const n = this.t.length;
    for (const [name, v] of Object.entries(values)) {
      if (!this.lines.has(name)) this.lines.set(name, new Array(n - 1).fill(null));
    }
    for (const [name, arr] of this.lines) arr.push(name in values ? values[name] : null);
    if (n > this.max) {
      this.t.shift();
      for (const arr of this.lines.values()) arr.shift();
    }
    return true;
  }
}

/** One poll's figures for the charts: host CPU (predicted, measured, all on host), PCIe per sNIC and
 *  direction, sNIC capacity used (%). Keys are "chart/line". */
export function sampleOf(placement, host) {
  const pred = placement.predicted || {};
  const meas = placement.measured || {};
  const v = {};
  if (pred.host_cores !== undefined) v["cpu/predicted"] = pred.host_cores;
  if (meas.cpu_cores) v["cpu/measured"] = meas.cpu_cores[HOST] ?? 0;
  if (pred.all_host_cores !== undefined) v["cpu/all on host"] = pred.all_host_cores;
  for (const s of host.snics) {
    const mp = (meas.pcie_gbps || {})[s.id];
    if (mp) {
      v[`pcie-${s.id}/up`] = mp.up ?? 0;
      v[`pcie-${s.id}/down`] = mp.down ?? 0;
    }
    const load = (pred.snic_load || {})[s.id];
    if (load !== undefined && s.capacity > 0) v[`snic/${s.id}`] = (100 * load) / s.capacity;
  }
  return v;
}

/** Split a Series into charts: {name: {lines: {line: values}}} by the "chart/line" keys. */
export function charts(series) {
  const out = {};
  for (const [key, vals] of series.lines) {
    const [chart, line] = key.split("/");
    (out[chart] ||= { lines: {} }).lines[line] = vals;
  }
  return out;
}

/** PCIe per sNIC and direction against its budget: [{snic, dir, gbps, budget, frac}]. */
export function pcieBars(placement, host) {
  const meas = (placement.measured || {}).pcie_gbps || {};
  const pred = ((placement.predicted || {}).pcie_gbps) || {};
  const out = [];
  for (const s of host.snics) {
    for (const dir of ["up", "down"]) {
      const m = (meas[s.id] || {})[dir];
      const p = (pred[s.id] || {})[dir];
      const gbps = m ?? p ?? 0;
      out.push({ snic: s.id, dir, gbps, predicted: p ?? null, budget: s.pcie_gbps,
        frac: s.pcie_gbps > 0 ? gbps / s.pcie_gbps : 0 });
    }
  }
  return out;
}

function fmt(x, digits = 2) {
  return typeof x === "number" ? x.toFixed(digits) : String(x);
}

function movesText(moves) {
  return (moves || []).map((m) => `${m.nf} ${m.from}→${m.to}`).join(", ");
}

/** The page's event list after a poll: the new events appended (only those after the newest held, so that
 *  an overlapping poll cannot add one twice), the newest `max` kept. */
export function mergeEvents(held, fresh, max = 500) {
  const last = held.length ? held[held.length - 1].t : -Infinity;
  return held.concat(fresh.filter((e) => e.t > last)).slice(-max);
}

/** One timeline row per recorded event, newest first: {t, kind, title, detail}. */
export function timelineRows(events, limit = 200) {
  const rows = [];
  for (const e of events.slice(-limit).reverse()) {
    rows.push({ t: e.t, kind: kindOf(e.event), title: titleOf(e), detail: detailOf(e) });
  }
  return rows;
}

function kindOf(event) {
  if (event === "placement-run") return "placement";
  if (event.startsWith("nf-migrate")) return "move";
  if (event.includes("failover") || event.startsWith("snic-")) return "failover";
  if (event.endsWith("-failed") || event === "store-down") return "error";
  return "event";
}

function titleOf(e) {
  switch (e.event) {
    case "placement-run":
      return e.go ? `placement run: moved ${movesText(e.moves)}` : "placement run: stayed";
    case "nf-migrate":
      return `${e.nf} moved ${e.src} → ${e.dst}`;
    case "nf-migrate-failed":
      return `${e.nf} move to ${e.dst} failed at ${e.step}`;
    case "nf-scale":
      return `${e.nf} scaled ${e.before} → ${e.after}`;
    case "nf-failover":
      return `${e.nf} failed over${e.to ? ` to ${e.to}` : ""}`;
    default:
      return e.nf ? `${e.event} ${e.nf}` : e.snic ? `${e.event} ${e.snic}` : e.event;
  }
}

function detailOf(e) {
  switch (e.event) {
    case "placement-run":
      return e.why || "";
    case "nf-migrate":
      return `remap ${fmt(e.remap_ms)} ms, move ${fmt(e.duration_ms, 1)} ms` +
        (e.protocol ? `, ${e.protocol}` : "");
    case "nf-scale":
      return `set ${fmt(e.set_ms)} ms`;
    default: {
      const skip = new Set(["t", "event", "nf", "snic", "steps"]);
      return Object.entries(e)
        .filter(([k, v]) => !skip.has(k) && v !== null && !(Array.isArray(v) && v.length === 0))
        .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
        .join(" ");
    }
  }
}

/** The NF table: one row per NF with where it runs, its instances, health, load and packets/s. */
export function nfRows(nfs, placement, health) {
  const meas = placement.measured || {};
  const load = meas.nf_load_gbps || {};
  const pps = meas.nf_pps || {};
  const h = (health && health.nfs) || {};
  return nfs.map((nf) => {
    const locs = [...new Set((nf.instances || []).map((i) => i.location))];
    return {
      id: nf.id,
      type: nf.type,
      location: locs.length ? locs.join("+") : nf.location || "-",
      instances: (nf.instances || []).length,
      states: (nf.instances || []).map((i) => i.state).join(","),
      health: h[nf.id] || "?",
      load: load[nf.id] !== undefined ? rateLabel(load[nf.id]) : "-",
      pps: pps[nf.id] !== undefined ? Math.round(pps[nf.id]).toString() : "-",
      pin: nf.pin || null,
    };
  }).sort((a, b) => a.id.localeCompare(b.id, "en", { numeric: true }));
}

/** An API error as the API gave it: "409 message (field to)". */
export function errorText(status, body) {
  if (body && typeof body === "object" && body.error) {
    return `${status} ${body.error}` + (body.field ? ` (field ${body.field})` : "");
  }
  return `${status} ${typeof body === "string" ? body : JSON.stringify(body)}`;
}
