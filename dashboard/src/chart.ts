/**
 * A time-series line chart drawn as SVG by hand: a fixed time window ending
 * now, a y axis from 0 to a round maximum, one line (and a faint area) per
 * series, the legend as HTML beside it. Presentation attributes only (fill,
 * stroke), no style attributes, so the page's CSP holds.
 */
import { h, s } from "./dom.js";
import { rate } from "./format.js";

export interface Series {
  readonly name: string;
  /** [time in ms, value] in time order. */
  readonly points: readonly (readonly [number, number])[];
}

export interface ChartOptions {
  readonly title: string;
  readonly unit: string;
  readonly series: readonly Series[];
  readonly windowMs: number;
  readonly now: number;
  /** data-chart attribute, for tests and styling. */
  readonly id: string;
}

export const PALETTE = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#db2777", "#65a30d"];

const W = 720;
const H = 200;
const M = { left: 52, right: 12, top: 12, bottom: 26 };

export function colorOf(index: number): string {
  return PALETTE[index % PALETTE.length]!;
}

/** The top of the y axis: four round steps (1, 2, 2.5 or 5 times a power of ten, at least 1) that cover `v`. */
export function niceMax(v: number): number {
  if (!(v > 4)) return 4;
  const raw = v / 4;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return 4 * m * p;
  return 40 * p;
}

export function lineChart(opts: ChartOptions): HTMLElement {
  const { series, windowMs, now } = opts;
  const from = now - windowMs;
  let max = 0;
  for (const sr of series) for (const [t, v] of sr.points) if (t >= from && v > max) max = v;
  const yMax = niceMax(max);
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const x = (t: number) => M.left + ((t - from) / windowMs) * pw;
  const y = (v: number) => M.top + ph - (v / yMax) * ph;

  const grid: SVGElement[] = [];
  for (let i = 0; i <= 4; i++) {
    const v = (yMax / 4) * i;
    grid.push(s("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: i === 0 ? "axis" : "grid" }));
    grid.push(
      s("text", { x: M.left - 8, y: y(v) + 4, "text-anchor": "end", class: "tick" }, Number.isInteger(v) ? String(v) : v.toFixed(1)),
    );
  }
  for (let i = 0; i <= 4; i++) {
    const t = from + (windowMs / 4) * i;
    const back = Math.round((now - t) / 1000);
    const label = i === 4 ? "now" : back >= 120 ? `−${(back / 60).toFixed(back % 60 === 0 ? 0 : 1)} min` : `−${back} s`;
    grid.push(s("text", { x: x(t), y: H - 8, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "tick" }, label));
  }

  const lines: SVGElement[] = [];
  series.forEach((sr, i) => {
    const pts = sr.points.filter(([t]) => t >= from - 5000).map(([t, v]) => [Math.max(x(t), M.left), y(v)] as const);
    if (pts.length === 0) return;
    const d = pts.map(([px, py], j) => `${j === 0 ? "M" : "L"}${px.toFixed(1)},${py.toFixed(1)}`).join("");
    const color = colorOf(i);
    if (pts.length > 1) {
      const area = `${d}L${pts[pts.length - 1]![0].toFixed(1)},${y(0)}L${pts[0]![0].toFixed(1)},${y(0)}Z`;
      lines.push(s("path", { d: area, fill: color, "fill-opacity": 0.08, stroke: "none" }));
    }
    lines.push(s("path", { d, fill: "none", stroke: color, "stroke-width": 2, "stroke-linejoin": "round", "stroke-linecap": "round" }));
    const [lx, ly] = pts[pts.length - 1]!;
    lines.push(s("circle", { cx: lx, cy: ly, r: 3, fill: color }));
  });

  const empty = series.every((sr) => sr.points.length === 0);
  const svg = s(
    "svg",
    {
      viewBox: `0 0 ${W} ${H}`,
      class: "chart-svg",
      role: "img",
      "aria-label": `${opts.title} over the last ${Math.round(windowMs / 1000)} seconds`,
    },
    grid,
    lines,
    empty ? s("text", { x: M.left + pw / 2, y: M.top + ph / 2, "text-anchor": "middle", class: "empty" }, "waiting for samples…") : null,
  );
  const legend = h(
    "ul",
    { class: "legend" },
    series.map((sr, i) => {
      const last = sr.points[sr.points.length - 1];
      return h(
        "li",
        null,
        h("span", { class: `swatch c${i % PALETTE.length}` }),
        h("span", { class: "name" }, sr.name),
        h("span", { class: "value" }, last === undefined ? "–" : rate(last[1])),
      );
    }),
  );
  return h(
    "figure",
    { class: "chart", "data-chart": opts.id },
    h("figcaption", null, opts.title, h("span", { class: "unit" }, opts.unit)),
    svg,
    legend,
  );
}
