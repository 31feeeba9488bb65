// Drawing model to SVG markup: the host picture and small line charts (own SVG, no library). Pure string
// builders, unit-tested under node (tests/ui/).

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563"];

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

/** The host picture: boxes, nodes (data-nf / data-loc attributes for tests and clicks), chain arrows. */
export function hostSvg(layout) {
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="host" width="${layout.width}" height="${layout.height}" ` +
      `viewBox="0 0 ${layout.width} ${layout.height}">`,
    `<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" ` +
      `orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#475569"/></marker></defs>`,
  ];
  for (const b of layout.boxes) {
    parts.push(`<g class="box box-${b.kind}${b.down ? " down" : ""}" data-box="${esc(b.id)}">` +
      `<rect x="${b.x + 1}" y="${b.y + 1}" width="${b.w - 2}" height="${b.h - 2}" rx="8"/>` +
      `<text x="${b.x + 10}" y="${b.y + 19}" class="box-label">${esc(b.label)}</text></g>`);
  }
  // arrows under the nodes, their labels above everything (with a halo, see style.css)
  const labels = [];
  for (const a of layout.arrows) {
    // a slight curve, so that both directions of a chain stay apart
    const mx = (a.x1 + a.x2) / 2 + (a.y2 - a.y1) * 0.15;
    const my = (a.y1 + a.y2) / 2 - (a.x2 - a.x1) * 0.15;
    parts.push(`<g class="arrow" data-src="${esc(a.src)}" data-dst="${esc(a.dst)}">` +
      `<path d="M${a.x1},${a.y1} Q${mx},${my} ${a.x2},${a.y2}" marker-end="url(#arr)"/></g>`);
    // the label at the curve's middle point
    const lx = 0.25 * a.x1 + 0.5 * mx + 0.25 * a.x2;
    const ly = 0.25 * a.y1 + 0.5 * my + 0.25 * a.y2;
    labels.push(`<text class="rate" x="${lx}" y="${ly}" text-anchor="middle">${esc(a.label)}</text>`);
  }
  for (const n of layout.nodes) {
    const attrs = n.kind === "nf" ? ` data-nf="${esc(n.nf)}" data-loc="${esc(n.loc)}"` : ` data-vertex="${esc(n.id)}"`;
    const title = n.kind === "nf" ? `${n.nf} (${n.type}) at ${n.loc}, ${n.instances} instance(s)` : n.id;
    parts.push(`<g class="node node-${n.kind}"${attrs}><title>${esc(title)}</title>` +
      `<rect x="${n.x}" y="${n.y}" width="${n.w}" height="${n.h}" rx="5"/>` +
      `<text x="${n.x + n.w / 2}" y="${n.y + n.h / 2 + 4}" text-anchor="middle">${esc(n.label)}</text></g>`);
  }
  parts.push(...labels);
  parts.push("</svg>");
  return parts.join("");
}

/** Scale of a chart: [lo, hi] over every value and the optional limit line, never empty. */
export function yRange(lines, limit) {
  let hi = limit ?? 0;
  let lo = 0;
  for (const vals of Object.values(lines)) {
    for (const v of vals) {
      if (v === null || !Number.isFinite(v)) continue;
      hi = Math.max(hi, v);
      lo = Math.min(lo, v);
    }
  }
  if (hi - lo < 1e-9) hi = lo + 1;
  return [lo, hi * 1.05];
}

/** A line chart: one polyline per line (gaps where a value is missing), an optional limit (budget) line and
 *  the time span it covers (`opts.span`, top right). */
export function chartSvg(title, lines, opts = {}) {
  const w = opts.width ?? 420;
  const h = opts.height ?? 150;
  const pad = { l: 44, r: 8, t: 20, b: 18 };
  const names = Object.keys(lines);
  const n = Math.max(0, ...names.map((k) => lines[k].length));
  const [lo, hi] = yRange(lines, opts.limit);
  const X = (i) => pad.l + (n <= 1 ? 0 : (i * (w - pad.l - pad.r)) / (n - 1));
  const Y = (v) => h - pad.b - ((v - lo) * (h - pad.t - pad.b)) / (hi - lo);
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="${w}" height="${h}" ` +
    `viewBox="0 0 ${w} ${h}"><text x="4" y="13" class="chart-title">${esc(title)}</text>` +
    (opts.span ? `<text x="${w - pad.r}" y="13" text-anchor="end" class="tick">${esc(opts.span)}</text>` : "") +
    `<line x1="${pad.l}" y1="${h - pad.b}" x2="${w - pad.r}" y2="${h - pad.b}" class="axis"/>` +
    `<text x="${pad.l - 4}" y="${pad.t + 8}" text-anchor="end" class="tick">${fmtTick(hi)}</text>` +
    `<text x="${pad.l - 4}" y="${h - pad.b}" text-anchor="end" class="tick">${fmtTick(lo)}</text>`];
  if (opts.limit !== undefined) {
    parts.push(`<line x1="${pad.l}" y1="${Y(opts.limit)}" x2="${w - pad.r}" y2="${Y(opts.limit)}" class="limit"/>` +
      `<text x="${w - pad.r}" y="${Y(opts.limit) - 3}" text-anchor="end" class="tick">${esc(opts.limitLabel ?? "limit")}</text>`);
  }
  names.forEach((name, k) => {
    const color = COLORS[k % COLORS.length];
    for (const seg of segments(lines[name])) {
      const pts = seg.map(([i, v]) => `${X(i).toFixed(1)},${Y(v).toFixed(1)}`).join(" ");
      parts.push(`<polyline points="${pts}" fill="none" stroke="${color}" stroke-width="1.6" data-line="${esc(name)}"/>`);
    }
    const last = lastValue(lines[name]);
    parts.push(`<text x="${pad.l + 4 + k * 120}" y="${h - 3}" fill="${color}" class="legend">` +
      `${esc(name)}${last === null ? "" : ` ${fmtTick(last)}`}</text>`);
  });
  parts.push("</svg>");
  return parts.join("");
}

function segments(vals) {
  const out = [];
  let cur = [];
  vals.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) {
      if (cur.length) out.push(cur);
      cur = [];
    } else cur.push([i, v]);
  });
  if (cur.length) out.push(cur);
  // a single point is drawn as a short flat line
  return out.map((s) => (s.length === 1 ? [s[0], [s[0][0] + 0.001, s[0][1]]] : s));
}

function lastValue(vals) {
  for (let i = vals.length - 1; i >= 0; i--) if (vals[i] !== null && Number.isFinite(vals[i])) return vals[i];
  return null;
}

export function fmtTick(v) {
  const a = Math.abs(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}

/** PCIe per sNIC and direction as horizontal bars against the budget. */
export function pcieSvg(bars, width = 420) {
  const rowH = 22;
  const h = bars.length * rowH + 4;
  const barX = 110;
  const barW = width - barX - 120;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" class="pcie" width="${width}" height="${h}">`];
  bars.forEach((b, i) => {
    const y = 2 + i * rowH;
    const frac = Math.min(1, Math.max(0, b.frac));
    const cls = b.frac > 0.9 ? "bar hot" : "bar";
    parts.push(`<g data-pcie="${esc(b.snic)}-${esc(b.dir)}"><text x="4" y="${y + 14}">${esc(b.snic)} ${esc(b.dir)}</text>` +
      `<rect x="${barX}" y="${y + 3}" width="${barW}" height="14" class="bar-bg"/>` +
      `<rect x="${barX}" y="${y + 3}" width="${(barW * frac).toFixed(1)}" height="14" class="${cls}"/>` +
      `<text x="${barX + barW + 6}" y="${y + 14}">${fmtTick(b.gbps)} / ${fmtTick(b.budget)} Gb/s</text></g>`);
  });
  parts.push("</svg>");
  return parts.join("");
}
