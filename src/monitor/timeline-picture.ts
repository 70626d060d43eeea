/**
 * The timeline picture: one lane pair per device (compute above, comm below),
 * every span a rectangle coloured by its kind, time left to right — so the
 * FC-group exchange running under conv backprop is visible at a glance.
 * Title, lane labels, step marks, time axis and legend in both pictures: the
 * positions come from one layout (timeline-layout.ts), drawn as SVG or as PNG
 * (pngjs, text in the built-in bitmap font).
 */
import { PNG } from 'pngjs';
import type { Span, SpanKind } from './span.js';
import { drawnSpans, timeRange, timelineLayout, type TextItem, type TimelineLayout } from './timeline-layout.js';
import { createRaster, drawText, fillRect } from './raster.js';
import { describeSelection, selectSteps, type StepRange } from './step-range.js';

export { SPAN_COLOURS, drawnSpans } from './timeline-layout.js';

export interface TimelineOptions {
  /**
   * Steps to draw (default: every span given, and the title is left as it is); the title then says which steps are
   * drawn.
   */
  steps?: StepRange;
  /**
   * The time axis spans at least this many ms (default: the drawn spans'): pictures drawn with the same spanMs share
   * one scale.
   */
  spanMs?: number;
}

function layoutFor(spans: readonly Span[], title: string, options: TimelineOptions): TimelineLayout {
  if (!options.steps) return timelineLayout(spans, title, options.spanMs);
  const selection = selectSteps(spans, options.steps);
  return timelineLayout(selection.spans, `${title}; ${describeSelection(selection)}`, options.spanMs);
}

/**
 * How many ms the drawn spans of `spans` (the steps `steps` of them) cover: what `spanMs` to give pictures to be
 * compared.
 */
export function drawnRangeMs(spans: readonly Span[], steps?: StepRange): number {
  const { t0, t1 } = timeRange(drawnSpans(steps ? selectSteps(spans, steps).spans : spans));
  return t1 > t0 ? t1 - t0 : 0;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const SVG_FONT_SIZE: Record<TextItem['size'], number> = { title: 13, label: 11 };
/** Bitmap font scale per text size in the PNG (5×7 glyphs: 7 or 14 pixels high). */
const PNG_TEXT_SCALE: Record<TextItem['size'], number> = { title: 2, label: 1 };

export function timelineSvg(spans: readonly Span[], title = 'tandem timeline', options: TimelineOptions = {}): string {
  const L = layoutFor(spans, title, options);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${L.width}" height="${L.height}" font-family="sans-serif" ` +
      `font-size="11">`,
    '<rect width="100%" height="100%" fill="white"/>',
  ];
  const line = (l: TimelineLayout['lines'][number]) =>
    `<line x1="${l.x1.toFixed(2)}" y1="${l.y1}" x2="${l.x2.toFixed(2)}" y2="${l.y2}" stroke="${l.stroke}"/>`;
  out.push(...L.marks.map(line));
  for (const b of L.spans) {
    const s = b.span;
    out.push(
      `<rect class="span" x="${b.x.toFixed(2)}" y="${b.y}" width="${b.width.toFixed(2)}" height="${b.height}" ` +
        `fill="${b.fill}"><title>${esc(s.name)} (step ${s.step}, ${(s.end - s.start).toFixed(2)} ` +
        `ms)</title></rect>`,
    );
  }
  out.push(...L.lines.map(line));
  out.push(
    ...L.swatches.map(b => `<rect x="${b.x}" y="${b.y}" width="${b.width}" height="${b.height}" fill="${b.fill}"/>`),
  );
  for (const t of L.texts) {
    const size = t.size === 'label' ? '' : ` font-size="${SVG_FONT_SIZE[t.size]}"`,
      anchor = t.anchor === 'start' ? '' : ` text-anchor="${t.anchor}"`;
    out.push(`<text x="${+t.x.toFixed(2)}" y="${t.y}"${size}${anchor} fill="${t.fill}">${esc(t.text)}</text>`);
  }
  out.push('</svg>');
  return out.join('\n');
}

export function timelinePng(spans: readonly Span[], title = 'tandem timeline', options: TimelineOptions = {}): Buffer {
  const L = layoutFor(spans, title, options);
  const raster = createRaster(L.width, L.height);
  // Lines are one pixel wide, on the pixel column or row they start in.
  const line = (l: TimelineLayout['lines'][number]) =>
    fillRect(raster, l.x1, l.y1, Math.max(l.x2, l.x1 + 1), Math.max(l.y2, l.y1 + 1), l.stroke);
  L.marks.forEach(line);
  for (const b of L.spans) fillRect(raster, b.x, b.y, b.x + b.width, b.y + b.height, b.fill);
  L.lines.forEach(line);
  for (const b of L.swatches) fillRect(raster, b.x, b.y, b.x + b.width, b.y + b.height, b.fill);
  for (const t of L.texts) drawText(raster, t.text, t.x, t.y, t.fill, PNG_TEXT_SCALE[t.size], t.anchor);
  const png = new PNG({ width: L.width, height: L.height });
  png.data.set(raster.data);
  return PNG.sync.write(png);
}

/** Spans back from a Chrome trace written by tandem (microseconds from the first span). */
export function spansFromChromeTrace(trace: {
  traceEvents: {
    ph: string;
    name: string;
    cat?: string;
    ts?: number;
    dur?: number;
    pid: number;
    tid: number;
    args?: { step?: number; group?: number; device?: number };
  }[];
}): Span[] {
  // A trace of several hosts: process = host, thread 2d / 2d+1 = device d's compute / comm, `args.device` = d.
  return trace.traceEvents
    .filter(e => e.ph === 'X')
    .map(e => ({
      device: e.args?.device ?? e.pid,
      thread: e.tid % 2 === 0 ? 'compute' : 'comm',
      kind: e.cat as SpanKind,
      name: e.name,
      step: e.args?.step ?? 0,
      group: e.args?.group,
      start: (e.ts ?? 0) / 1000,
      end: ((e.ts ?? 0) + (e.dur ?? 0)) / 1000,
      ...(e.args?.device === undefined ? {} : { host: e.pid }),
    }));
}

/** Share of the exchange time that ran while the same device's compute thread was busy in backward. */
export function overlapShare(spans: readonly Span[]): number {
  let exchange = 0,
    overlapped = 0;
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
