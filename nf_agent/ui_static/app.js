// The page's I/O: polls the agent's REST API every second, draws with model.js/svg.js, sends the
// operator's actions (migrate, scale, restart) to the same API and shows its errors as given.
// The token (when the agent has one) lives in this tab's sessionStorage and goes out as a Bearer header.

import {
  Series, charts, errorText, hostLayout, mergeEvents, nfRows, pcieBars, sampleOf, timeLabel, timelineRows,
} from "./model.js";
import { chartSvg, esc, hostSvg, pcieSvg } from "./svg.js";

const POLL_MS = 1000;
const TOKEN_KEY = "uno-agent-token";
const $ = (id) => document.getElementById(id);

const view = {
  series: new Series(300),
  events: [],
  lastT: null,
  hostKey: "",
  rows: new Map(),
  locations: [],
  redraws: 0,
  lastRedrawMs: null,
  lastPollMs: null,
  polls: 0,
  inflight: false,
  error: null,
};
window.unoView = view; // read by the browser tests and the redraw bench

class ApiError extends Error {
  constructor(status, body) {
    super(errorText(status, body));
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let data = text;
  try {
    data = JSON.parse(text);
  } catch {
    // not JSON: shown as text
  }
  // /v1/health answers 503 with its JSON when something is unhealthy: still data
  if (!resp.ok && !(path === "/v1/health" && resp.status === 503)) throw new ApiError(resp.status, data);
  return data;
}

function showLogin(show) {
  $("login").hidden = !show;
}

async function poll() {
  if (view.inflight) return; // a slow answer: the next tick asks again
  view.inflight = true;
  try {
    const since = view.lastT === null ? "" : `?since=${view.lastT}`;
    const p0 = performance.now();
    const [host, nfs, placement, health, ev] = await Promise.all([
      api("GET", "/v1/host"), api("GET", "/v1/nfs"), api("GET", "/v1/placement"),
      api("GET", "/v1/health"), api("GET", `/v1/events${since}`),
    ]);
    view.lastPollMs = performance.now() - p0;
    showLogin(false);
    view.error = null;
    view.polls += 1;
    render(host, nfs, placement, health, ev.events);
    $("status").textContent = `updated ${new Date().toLocaleTimeString()} · ${nfs.length} NFs`;
  } catch (e) {
    view.error = e.message;
    if (e.status === 401) showLogin(true);
    $("status").textContent = `agent: ${e.message}`;
  } finally {
    view.inflight = false;
  }
}

function render(host, nfs, placement, health, newEvents) {
  const t0 = performance.now();
  view.locations = host.locations;
  const edges = placement.measured ? placement.measured.edges : placement.traffic;
  const layout = hostLayout(host, nfs, edges);
  const svg = hostSvg(layout);
  if (svg !== view.hostKey) {
    $("host").innerHTML = svg;
    view.hostKey = svg;
  }
  $("edges-note").textContent = placement.measured ? "arrows: measured Gbit/s" : "arrows: expected Gbit/s (no measurement yet)";
  const t = placement.measured ? placement.measured.t : host.t;
  view.series.push(t, sampleOf(placement, host));
  renderCharts(host);
  $("pcie").innerHTML = pcieSvg(pcieBars(placement, host));
  const merged = mergeEvents(view.events, newEvents);
  if (merged.length !== view.events.length || merged[merged.length - 1] !== view.events[view.events.length - 1]) {
    view.events = merged;
    view.lastT = merged[merged.length - 1].t;
    renderTimeline();
  }
  renderSolve(placement.last_solve);
  renderTable(nfRows(nfs, placement, health));
  document.body.getBoundingClientRect(); // the style and layout the browser owes before its next paint
  view.redraws += 1;
  view.lastRedrawMs = performance.now() - t0;
}

function renderCharts(host) {
  const c = charts(view.series);
  const t = view.series.t;
  const span = t.length ? `${timeLabel(t[0])} – ${timeLabel(t[t.length - 1])}` : "";
  const parts = [];
  if (c.cpu) parts.push(chartSvg("host CPU for NFs (cores)", c.cpu.lines, { span }));
  for (const s of host.snics) {
    const k = `pcie-${s.id}`;
    if (c[k]) {
      parts.push(chartSvg(`PCIe ${s.id} (Gbit/s)`, c[k].lines, { limit: s.pcie_gbps, limitLabel: "budget", span }));
    }
  }
  if (c.snic) {
    parts.push(chartSvg("sNIC capacity used (%)", c.snic.lines, { limit: 100, limitLabel: "capacity", span }));
  }
  $("charts").innerHTML = parts.join("");
}

function renderSolve(d) {
  $("solve").textContent = d
    ? `last solve: ${d.go ? "moved" : "stayed"} — ${d.why || ""} (host cores ${fmt(d.current_host_cost)} → ${fmt(d.new_host_cost)})`
    : "last solve: none yet";
}

function fmt(x) {
  return typeof x === "number" ? x.toFixed(2) : "-";
}

function renderTimeline() {
  $("timeline").innerHTML = timelineRows(view.events).map((r) =>
    `<li class="ev ev-${r.kind}"><span class="t">${esc(timeLabel(r.t))}</span> ` +
    `<b>${esc(r.title)}</b> <span class="detail">${esc(r.detail)}</span></li>`).join("");
}

// The NF table is keyed by NF id: rows are created once and only their cells change, so that a select or
// number the operator is editing survives the next poll.
function renderTable(rows) {
  const body = $("nf-rows");
  const seen = new Set();
  rows.forEach((r, i) => {
    seen.add(r.id);
    let tr = view.rows.get(r.id);
    if (!tr) {
      tr = newRow(r.id);
      view.rows.set(r.id, tr);
    }
    // moved only when out of order: moving a row would take the focus from its controls
    if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null);
    for (const k of ["type", "location", "instances", "states", "health", "load", "pps"]) {
      const td = tr.querySelector(`[data-col=${k}]`);
      const v = String(r[k]);
      if (td.textContent !== v) td.textContent = v;
    }
    tr.dataset.location = r.location;
    tr.dataset.health = r.health;
    const sel = tr.querySelector("select");
    if (sel.options.length !== view.locations.length) {
      sel.innerHTML = view.locations.map((l) => `<option>${esc(l)}</option>`).join("");
    }
    // offer a move away from where it runs, unless the operator is choosing right now
    if (sel.value === r.location && document.activeElement !== sel) {
      const other = view.locations.find((l) => l !== r.location);
      if (other) sel.value = other;
    }
  });
  for (const [id, tr] of view.rows) {
    if (!seen.has(id)) {
      tr.remove();
      view.rows.delete(id);
    }
  }
}

function newRow(id) {
  const tr = document.createElement("tr");
  tr.dataset.nf = id;
  tr.innerHTML = `<td>${esc(id)}</td>` +
    ["type", "location", "instances", "states", "health", "load", "pps"].map((k) => `<td data-col="${k}"></td>`).join("") +
    `<td class="actions"><select aria-label="move to"></select><button data-act="migrate">migrate</button>` +
    `<input type="number" min="1" value="2" aria-label="instances"><button data-act="scale">scale</button>` +
    `<button data-act="restart">restart</button></td>`;
  tr.querySelector("[data-act=migrate]").onclick = () =>
    act(id, "migrate", { to: tr.querySelector("select").value });
  tr.querySelector("[data-act=scale]").onclick = () =>
    act(id, "scale", { instances: Number(tr.querySelector("input").value) });
  tr.querySelector("[data-act=restart]").onclick = () => act(id, "restart", {});
  return tr;
}

async function act(id, what, body) {
  const out = $("action-result");
  out.className = "pending";
  out.textContent = `${what} ${id}…`;
  try {
    const res = await api("POST", `/v1/nfs/${encodeURIComponent(id)}/${what}`, body);
    out.className = "ok";
    out.textContent = `${what} ${id}: ${JSON.stringify(res)}`;
  } catch (e) {
    out.className = "error";
    out.textContent = `${what} ${id}: ${e.message}`;
  }
  poll();
}

function start() {
  $("login-form").onsubmit = (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    poll();
  };
  $("logout").onclick = () => {
    sessionStorage.removeItem(TOKEN_KEY);
    poll();
  };
  poll();
  setInterval(poll, POLL_MS);
}

start();
