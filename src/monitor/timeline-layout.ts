/**
 * Where everything of the timeline picture goes: title, lane labels, step
 * marks, span rectangles, time axis with ticks, legend. One layout, two
 * renderers (SVG and PNG in timeline-picture.ts), so the pictures cannot drift.
 * Text positions are SVG-style: x with an anchor, y the baseline.
 */
import type { Span, SpanKind } from './span.js';
import type { TextAnchor } from './raster.js';

export const SPAN_COLOURS: Record<SpanKind, string> = {
  load: '#9e9e9e',
  forward: '#4e79a7',
  backward: '#f28e2b',
  handoff: '#76b7b2',
  wait: '#e0e0e0',
  exchange: '#e15759',
  apply: '#59a14f',
};

export const PICTURE_WIDTH = 1200;
const LANE = 22,
  GAP = 6,
  LEFT = 120,
  RIGHT = 40,
  TOP = 44,
  CHAR = 6;
const INK = '#222222',
  AXIS = '#333333',
  MARK = '#c8c8c8';

export interface TextItem {
  text: string;
  x: number;
  y: number;
  size: 'title' | 'label';
  anchor: TextAnchor;
  fill: string;
}
export interface BoxItem {
  x: number;
  y: number;
  width: number;
  height: number;
  fill: string;
}
export interface SpanBox extends BoxItem {
  span: Span;
}
export interface LineItem {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  stroke: string;
}

export interface TimelineLayout {
  width: number;
  height: number;
  texts: TextItem[];
  /** Drawn under the spans (step marks). */
  marks: LineItem[];
  spans: SpanBox[];
  /** Drawn over the spans (axis and ticks). */
  lines: LineItem[];
  swatches: BoxItem[];
}

/**
 * Spans drawn: per-layer backward spans are drawn; the per-group ones (which cover them) are skipped to keep the lanes
 * readable.
 */
export function drawnSpans(spans: readonly Span[]): Span[] {
  return spans.filter(
    s => !(s.kind === 'backward' && s.group !== undefined && s.thread === 'compute') && s.end > s.start,
  );
}

const text = (
  t: string,
  x: number,
  y: number,
  anchor: TextAnchor = 'start',
  size: TextItem['size'] = 'label',
): TextItem => ({ text: t, x, y, size, anchor, fill: INK });

/** A tick spacing of 1, 2 or 5 × 10^k giving about `target` ticks over `span`. */
export function tickStep(span: number, target = 8): number {
  const raw = Math.max(span, 1e-9) / target,
    power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map(m => m * power).find(s => s >= raw) ?? 10 * power;
}

function tickLabel(ms: number, step: number): string {
  return `${ms.toFixed(Math.max(0, -Math.floor(Math.log10(step))))} ms`;
}

/**
 * The earliest start and latest end of `spans` (loops, not Math.min(...spans): a long run is more spans than a call
 * takes arguments).
 */
export function timeRange(spans: readonly Span[]): { t0: number; t1: number } {
  let t0 = Infinity,
    t1 = -Infinity;
  for (const s of spans) {
    t0 = Math.min(t0, s.start);
    t1 = Math.max(t1, s.end);
  }
  return { t0, t1 };
}

/**
 * `spanMs`: the time axis spans at least this many ms from the first span, so pictures given the same spanMs share one
 * scale.
 */
export function timelineLayout(spans: readonly Span[], title: string, spanMs?: number): TimelineLayout {
  const drawn = drawnSpans(spans);
  const base = { width: PICTURE_WIDTH, marks: [], lines: [], swatches: [], spans: [] };
  if (drawn.length === 0)
    return { ...base, height: 60, texts: [text(title, 10, 18, 'start', 'title'), text('no spans', 10, 40)] };
  const devices = [...new Set(drawn.map(s => s.device))].sort((a, b) => a - b);
  const range = timeRange(drawn);
  const t0 = range.t0;
  let t1 = range.t1;
  if (spanMs !== undefined) t1 = Math.max(t1, t0 + spanMs);
  const scale = (PICTURE_WIDTH - LEFT - RIGHT) / Math.max(1e-9, t1 - t0);
  const x = (t: number) => LEFT + (t - t0) * scale;
  const y = (device: number, thread: Span['thread']) =>
    TOP + devices.indexOf(device) * (2 * LANE + 2 * GAP) + (thread === 'comm' ? LANE + GAP / 2 : 0);
  const lanesBottom = TOP + devices.length * (2 * LANE + 2 * GAP) - GAP;
  const texts = [text(title, 10, 18, 'start', 'title')];
  for (const d of devices)
    texts.push(text(`device ${d} compute`, 10, y(d, 'compute') + 15), text(`device ${d} comm`, 10, y(d, 'comm') + 15));
  const marks = stepMarks(drawn, x, lanesBottom, texts);
  const boxes = drawn.map(s => {
    const left = x(s.start);
    return {
      span: s,
      x: left,
      y: y(s.device, s.thread),
      width: Math.max(0.5, x(s.end) - left),
      height: LANE,
      fill: SPAN_COLOURS[s.kind],
    };
  });
  const axisY = lanesBottom + 10;
  const lines = [{ x1: LEFT, y1: axisY, x2: PICTURE_WIDTH - RIGHT, y2: axisY, stroke: AXIS }];
  const step = tickStep(t1 - t0);
  for (let v = 0; v <= t1 - t0 + step * 1e-6; v += step) {
    lines.push({ x1: x(t0 + v), y1: axisY, x2: x(t0 + v), y2: axisY + 4, stroke: AXIS });
    texts.push(text(tickLabel(v, step), x(t0 + v), axisY + 16, 'middle'));
  }
  const swatches: BoxItem[] = [];
  (Object.entries(SPAN_COLOURS) as [SpanKind, string][]).forEach(([kind, colour], i) => {
    swatches.push({ x: LEFT + i * 90, y: axisY + 25, width: 10, height: 10, fill: colour });
    texts.push(text(kind, LEFT + i * 90 + 14, axisY + 34));
  });
  return { width: PICTURE_WIDTH, height: axisY + 46, texts, marks, spans: boxes, lines, swatches };
}

/** A thin line where each step's first forward span starts, labelled `step N` above the lanes when there is room. */
function stepMarks(drawn: readonly Span[], x: (t: number) => number, bottom: number, texts: TextItem[]): LineItem[] {
  const starts = new Map<number, number>();
  for (const s of drawn)
    if (s.kind === 'forward') starts.set(s.step, Math.min(starts.get(s.step) ?? Infinity, s.start));
  const marks: LineItem[] = [];
  let labelEnd = -Infinity;
  for (const [step, start] of [...starts].sort((a, b) => a[0] - b[0])) {
    const at = x(start),
      label = `step ${step}`;
    marks.push({ x1: at, y1: TOP - 12, x2: at, y2: bottom, stroke: MARK });
    if (at + 3 > labelEnd + CHAR) {
      texts.push(text(label, at + 3, TOP - 4));
      labelEnd = at + 3 + label.length * CHAR;
    }
  }
  return marks;
}
