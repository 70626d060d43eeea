/** A timed span of one device thread, for the timeline and the Chrome trace. */
export const SPAN_KINDS = ['load', 'forward', 'backward', 'handoff', 'wait', 'exchange', 'apply'] as const;
export type SpanKind = (typeof SPAN_KINDS)[number];

export interface Span {
  /** Global rank. */
  device: number;
  /** Several hosts: the host the device is on. */
  host?: number;
  thread: 'compute' | 'comm';
  kind: SpanKind;
  /** e.g. `backward fc1`, `exchange fc`. */
  name: string;
  step: number;
  /** Exchange group, for backward/exchange/apply spans of a group. */
  group?: number;
  /** Milliseconds since the Unix epoch (performance.timeOrigin + performance.now()): comparable across threads. */
  start: number;
  end: number;
  /** A group's last exchange span: the bytes this rank handed to the collective for the group (4 per wire float). */
  bytes?: number;
}

/** Now, in the clock every thread of the run shares. */
export function wallNow(): number {
  return performance.timeOrigin + performance.now();
}
