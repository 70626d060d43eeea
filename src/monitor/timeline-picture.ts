/**
 * The timeline picture: one lane pair per device (compute above, comm below),
 * every span a rectangle coloured by its kind, time left to right — so the
 * FC-group exchange running under conv backprop is visible at a glance.
 * As SVG (with a legend and a time axis) or as PNG (the same rectangles).
 */
import { PNG } from 'pngjs';
import type { Span, SpanKind } from './span.js';

export const SPAN_COLOURS: Record<SpanKind, string> = {
  load: '#9e9e9e', forward: '#4e79a7', backward: '#f28e2b', handoff: '#76b7b2', wait: '#e0e0e0', exchange: '#e15759', apply: '#59a14f',
};

const LANE = 22, GAP = 6, LEFT = 110, RIGHT = 20, TOP = 30, WIDTH = 1200;

interface Layout { devices: number[]; t0: number; t1: number; x(t: number): number; y(device: number, thread: Span['thread']): number; height: number }

/** Spans drawn: per-layer backward spans are drawn; the per-group ones (which cover them) are skipped to keep the lanes readable. */
export function drawnSpans(spans: readonly Span[]): Span[] {
  return spans.filter(s => !(s.kind === 'backward' && s.group !== undefined && s.thread === 'compute') && s.end > s.start);
}

function layout(spans: readonly Span[]): Layout {
  const devices = [...new Set(spans.map(s => s.device))].sort((a, b) => a - b);
  const t0 = Math.min(...spans.map(s => s.start)), t1 = Math.max(...spans.map(s => s.end));
  const scale = (WIDTH - LEFT - RIGHT) / Math.max(1e-9, t1 - t0);
  return {
    devices, t0, t1,
    x: t => LEFT + (t - t0) * scale,
    y: (device, thread) => TOP + devices.indexOf(device) * (2 * LANE + 2 * GAP) + (thread === 'comm' ? LANE + GAP / 2 : 0),
    height: TOP + devices.length * (2 * LANE + 2 * GAP) + 40,
  };
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function timelineSvg(spans: readonly Span[], title = 'tandem timeline'): string {
  const drawn = drawnSpans(spans);
  if (drawn.length === 0) return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="60"><text x="10" y="30">no spans</text></svg>`;
  const L = layout(drawn);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${L.height}" font-family="sans-serif" font-size="11">`);
  out.push(`<rect width="100%" height="100%" fill="white"/><text x="10" y="18" font-size="13">${esc(title)}</text>`);
  for (const d of L.devices) {
    out.push(`<text x="10" y="${L.y(d, 'compute') + 15}">device ${d} compute</text><text x="10" y="${L.y(d, 'comm') + 15}">device ${d} comm</text>`);
  }
  for (const s of drawn) {
    const x = L.x(s.start), w = Math.max(0.5, L.x(s.end) - x);
    out.push(`<rect class="span" x="${x.toFixed(2)}" y="${L.y(s.device, s.thread)}" width="${w.toFixed(2)}" height="${LANE}" fill="${SPAN_COLOURS[s.kind]}"><title>${esc(s.name)} (step ${s.step}, ${(s.end - s.start).toFixed(2)} ms)</title></rect>`);
  }
  const axisY = L.height - 30, ms = L.t1 - L.t0;
  out.push(`<line x1="${LEFT}" y1="${axisY}" x2="${WIDTH - RIGHT}" y2="${axisY}" stroke="#333"/><text x="${LEFT}" y="${axisY + 14}">0 ms</text>` +
    `<text x="${WIDTH - RIGHT - 60}" y="${axisY + 14}">${ms.toFixed(1)} ms</text>`);
  let lx = LEFT + 120;
  for (const [kind, colour] of Object.entries(SPAN_COLOURS)) {
    out.push(`<rect x="${lx}" y="${axisY + 6}" width="10" height="10" fill="${colour}"/><text x="${lx + 14}" y="${axisY + 15}">${kind}</text>`);
    lx += 90;
  }
  out.push('</svg>');
  return out.join('\n');
}

export function timelinePng(spans: readonly Span[]): Buffer {
  const drawn = drawnSpans(spans);
  const L = drawn.length ? layout(drawn) : { height: 60 } as Layout;
  const png = new PNG({ width: WIDTH, height: L.height });
  png.data.fill(255);
  const fill = (x0: number, y0: number, x1: number, y1: number, hex: string) => {
    const r = parseInt(hex.slice(1, 3), 16), g = parseInt(hex.slice(3, 5), 16), b = parseInt(hex.slice(5, 7), 16);
    for (let y = Math.max(0, Math.floor(y0)); y < Math.min(png.height, Math.ceil(y1)); y++) {
      for (let x = Math.max(0, Math.floor(x0)); x < Math.min(png.width, Math.max(Math.floor(x0) + 1, Math.ceil(x1))); x++) {
        const i = (y * png.width + x) * 4;
        png.data[i] = r; png.data[i + 1] = g; png.data[i + 2] = b; png.data[i + 3] = 255;
      }
    }
  };
  for (const s of drawn) fill(L.x(s.start), L.y(s.device, s.thread), L.x(s.end), L.y(s.device, s.thread) + LANE, SPAN_COLOURS[s.kind]);
  return PNG.sync.write(png);
}

/** Spans back from a Chrome trace written by tandem (microseconds from the first span). */
export function spansFromChromeTrace(trace: { traceEvents: { ph: string; name: string; cat?: string; ts?: number; dur?: number; pid: number; tid: number; args?: { step?: number; group?: number; device?: number } }[] }): Span[] {
  // A trace of several hosts: process = host, thread 2d / 2d+1 = device d's compute / comm, `args.device` = d.
  return trace.traceEvents.filter(e => e.ph === 'X').map(e => ({
    device: e.args?.device ?? e.pid, thread: e.tid % 2 === 0 ? 'compute' : 'comm', kind: e.cat as SpanKind, name: e.name, step: e.args?.step ?? 0, group: e.args?.group,
    start: (e.ts ?? 0) / 1000, end: ((e.ts ?? 0) + (e.dur ?? 0)) / 1000,
    ...(e.args?.device === undefined ? {} : { host: e.pid }),
  }));
}

/** Share of the exchange time that ran while the same device's compute thread was busy in backward. */
export function overlapShare(spans: readonly Span[]): number {
  let exchange = 0, overlapped = 0;
  for (const ex of spans) {
    if (ex.kind !== 'exchange') continue;
    exchange += ex.end - ex.start;
    for (const bw of spans) {
      if (bw.kind !== 'backward' || bw.device !== ex.device || bw.step !== ex.step || bw.group === undefined) continue;
      overlapped += Math.max(0, Math.min(ex.end, bw.end) - Math.max(ex.start, bw.start));
    }
  }
  return exchange > 0 ? overlapped / exchange : 0;
}
