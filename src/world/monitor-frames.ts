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
