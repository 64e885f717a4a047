// Line charts as inline SVG text, for reports that open offline (no script, no CDN):
// axes with round-number ticks, one path per series broken at missing values, a
// marker with a hover title on every point of sparse series, and a legend.

export interface Series {
  name: string;
  color: string;
  /** [x, y]; a null y breaks the line. */
  points: readonly (readonly [number, number | null])[];
  dashed?: boolean;
  /** Draw a marker at every point (sparse series such as validation). */
  markers?: boolean;
}

export interface ChartOptions {
  title: string;
  series: readonly Series[];
  xLabel?: string;
  width?: number;
  height?: number;
  /** Carry its own style, for an .svg file outside the HTML report (whose stylesheet styles the chart otherwise). */
  standalone?: boolean;
}

const STANDALONE_STYLE = '<style>svg{background:#fff;font-family:sans-serif}.title{font-size:13px;font-weight:600}.tick,.legend,.axis,.empty{font-size:10px;fill:#444}.grid{stroke:#eee}.frame{fill:none;stroke:#999}.series{fill:none;stroke-width:1.6}</style>';

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** About `count` round-number ticks covering [lo, hi]. */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!(Number.isFinite(lo) && Number.isFinite(hi))) return [];
  if (hi === lo) {
    const pad = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1;
    return niceTicks(lo - pad, hi + pad, count);
  }
  const raw = (hi - lo) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const start = Math.floor(lo / step) * step;
  const ticks: number[] = [];
  for (let t = start; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  if (ticks[ticks.length - 1] < hi) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

function label(v: number): string {
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1);
  return String(Number(v.toPrecision(4)));
}

export function lineChart({ title, series, xLabel = 'iteration', width = 480, height = 260, standalone = false }: ChartOptions): string {
  const margin = { left: 56, right: 12, top: 28, bottom: 40 };
  const legendRows = Math.ceil(series.length / 2);
  const legendHeight = legendRows * 14;
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const totalH = height + legendHeight + 6;
  const finite = series.flatMap((s) => s.points.filter((p): p is [number, number] => p[1] !== null && Number.isFinite(p[1]) && Number.isFinite(p[0])));
  const out: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="${width}" height="${totalH}" viewBox="0 0 ${width} ${totalH}" role="img" aria-label="${escapeXml(title)}">`];
  if (standalone) out.push(STANDALONE_STYLE);
  out.push(`<text x="${width / 2}" y="16" text-anchor="middle" class="title">${escapeXml(title)}</text>`);
  if (finite.length === 0) {
    out.push(`<text x="${width / 2}" y="${height / 2}" text-anchor="middle" class="empty">no data</text></svg>`);
    return out.join('');
  }
  const xs = niceTicks(Math.min(...finite.map((p) => p[0])), Math.max(...finite.map((p) => p[0])));
  const ys = niceTicks(Math.min(...finite.map((p) => p[1])), Math.max(...finite.map((p) => p[1])));
  const [x0, x1, y0, y1] = [xs[0], xs[xs.length - 1], ys[0], ys[ys.length - 1]];
  const px = (x: number) => margin.left + ((x - x0) / (x1 - x0)) * plotW;
  const py = (y: number) => margin.top + plotH - ((y - y0) / (y1 - y0)) * plotH;
  const f = (v: number) => v.toFixed(1);
  for (const t of ys) {
    out.push(`<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${f(py(t))}" y2="${f(py(t))}" class="grid"/>`);
    out.push(`<text x="${margin.left - 4}" y="${f(py(t) + 3)}" text-anchor="end" class="tick">${label(t)}</text>`);
  }
  for (const t of xs) out.push(`<text x="${f(px(t))}" y="${margin.top + plotH + 14}" text-anchor="middle" class="tick">${label(t)}</text>`);
  out.push(`<rect x="${margin.left}" y="${margin.top}" width="${plotW}" height="${plotH}" class="frame"/>`);
  out.push(`<text x="${margin.left + plotW / 2}" y="${margin.top + plotH + 30}" text-anchor="middle" class="axis">${escapeXml(xLabel)}</text>`);
  for (const s of series) {
    let d = '';
    let pen = false;
    for (const [x, y] of s.points) {
      if (y === null || !Number.isFinite(y) || !Number.isFinite(x)) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${f(px(x))},${f(py(y))}`;
      pen = true;
    }
    const name = escapeXml(s.name);
    if (d) out.push(`<path d="${d}" class="series" stroke="${s.color}"${s.dashed ? ' stroke-dasharray="5,3"' : ''}><title>${name}</title></path>`);
    const pts = s.points.filter((p): p is [number, number] => p[1] !== null && Number.isFinite(p[1]));
    if (s.markers || pts.length === 1) {
      for (const [x, y] of pts) out.push(`<circle cx="${f(px(x))}" cy="${f(py(y))}" r="2.5" fill="${s.color}"><title>${name} @ ${label(x)}: ${label(y)}</title></circle>`);
    }
  }
  series.forEach((s, i) => {
    const lx = margin.left + (i % 2) * (plotW / 2);
    const ly = height + 6 + Math.floor(i / 2) * 14;
    out.push(`<line x1="${lx}" x2="${lx + 16}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5,3"' : ''}/>`);
    out.push(`<text x="${lx + 20}" y="${ly}" class="legend">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('');
}
