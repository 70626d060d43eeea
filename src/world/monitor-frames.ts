/**
 * What a host other than 0 sends host 0's monitor hub (monitor-link.ts ->
 * monitor-hub.ts): one JSON object per line. Steps carry each device's loss
 * (host 0 averages them in global rank order, as one process would), spans
 * the host's timeline, events its warnings (and its failure, as a warning).
 */
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';

/** One host's share of one step. */
export interface HostStep {
  step: number;
  /** Per local device, in local order. */
  losses: number[];
  /** Correct predictions over the host's devices. */
  correct: number;
  stepMs: number;
  computeMs: number[];
  numTensors: number[];
  /** ms the host's step loop waited for inputs in this step (data not loaded ahead in time). */
  dataWaitMs: number;
}

export type MonitorFrame =
  | { type: 'hello'; host: number }
  | ({ type: 'step'; host: number } & HostStep)
  | { type: 'spans'; host: number; spans: Span[] }
  | { type: 'event'; host: number; event: RunEvent }
  /** The host is done sending; `dropped`: span frames it dropped because host 0 read too slowly. */
  | { type: 'end'; host: number; dropped: number };

/** Longest line the hub accepts (a host sending more is cut off). */
export const MAX_FRAME_BYTES = 16 << 20;

export function encodeFrame(frame: MonitorFrame): string {
  return `${JSON.stringify(frame)}\n`;
}

/** Deepest nesting a frame may have (a span list in a frame is 3 deep; an event a few more). */
const MAX_DEPTH = 12;
/** Most entries of one array or object in a frame. */
const MAX_ENTRIES = 1 << 16;
// eslint-disable-next-line no-control-regex -- the control characters are what it finds
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** A frame the hub refuses: the message names the field and what is wrong with it. */
export class FrameInvalid extends Error {}

/**
 * Plain JSON values all the way down: finite numbers, strings without control characters (raw terminal escapes are
 * not printed as a host's warning), no `__proto__`/`constructor`/`prototype` keys, bounded depth and width.
 */
function checkPlain(value: unknown, at: string, depth: number): void {
  if (depth > MAX_DEPTH) throw new FrameInvalid(`${at}: nested deeper than ${MAX_DEPTH}`);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new FrameInvalid(`${at}: ${value} is not a finite number`);
  } else if (typeof value === 'string') {
    if (CONTROL.test(value)) throw new FrameInvalid(`${at}: a string with control characters`);
  } else if (Array.isArray(value)) {
    if (value.length > MAX_ENTRIES) throw new FrameInvalid(`${at}: ${value.length} entries, over ${MAX_ENTRIES}`);
    value.forEach((v, i) => checkPlain(v, `${at}[${i}]`, depth + 1));
  } else if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length > MAX_ENTRIES) throw new FrameInvalid(`${at}: ${keys.length} keys, over ${MAX_ENTRIES}`);
    for (const k of keys) {
      if (k === '__proto__' || k === 'constructor' || k === 'prototype' || CONTROL.test(k))
        throw new FrameInvalid(`${at}: key ${JSON.stringify(k)} refused`);
      checkPlain((value as Record<string, unknown>)[k], `${at}.${k}`, depth + 1);
    }
  } else if (typeof value !== 'boolean' && value !== null) {
    throw new FrameInvalid(`${at}: not a JSON value`);
  }
}

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isTime = (v: unknown): v is number => typeof v === 'number' && v >= 0 && v < 1e12;

function numbers(v: unknown, at: string, ok: (x: unknown) => boolean): void {
  if (!Array.isArray(v) || !v.every(ok)) throw new FrameInvalid(`${at}: expected an array of numbers in range`);
}

/** The frame in `value` (JSON.parse's), every field checked; FrameInvalid naming the first field that is not right. */
export function checkFrame(value: unknown): MonitorFrame {
  checkPlain(value, 'frame', 0);
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new FrameInvalid('frame: not an object');
  const f = value as Record<string, unknown>;
  if (!isCount(f.host)) throw new FrameInvalid('frame.host: not a host number');
  switch (f.type) {
    case 'hello':
      break;
    case 'step':
      if (!isCount(f.step)) throw new FrameInvalid('frame.step: not a step number');
      numbers(f.losses, 'frame.losses', x => typeof x === 'number');
      if (!isCount(f.correct)) throw new FrameInvalid('frame.correct: not a count');
      if (!isTime(f.stepMs)) throw new FrameInvalid('frame.stepMs: not a duration');
      if (!isTime(f.dataWaitMs)) throw new FrameInvalid('frame.dataWaitMs: not a duration');
      numbers(f.computeMs, 'frame.computeMs', isTime);
      numbers(f.numTensors, 'frame.numTensors', isCount);
      break;
    case 'spans':
      if (!Array.isArray(f.spans) || !f.spans.every(s => s !== null && typeof s === 'object'))
        throw new FrameInvalid('frame.spans: not an array of spans');
      break;
    case 'event': {
      const e = f.event as Record<string, unknown> | null;
      if (e === null || typeof e !== 'object' || typeof e.type !== 'string')
        throw new FrameInvalid('frame.event: not an event');
      break;
    }
    case 'end':
      if (!isCount(f.dropped)) throw new FrameInvalid('frame.dropped: not a count');
      break;
    default:
      throw new FrameInvalid(`frame.type: ${JSON.stringify(String(f.type).slice(0, 20))} is not a monitor frame`);
  }
  return value as MonitorFrame;
}
