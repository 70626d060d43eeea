/**
 * A group's exchange and update as the main thread hears of it: its spans (the comm thread's wait, one exchange per
 * unit sent, the update) and times. The comm thread sends one a group; a device that updates on its compute thread
 * (inline-update.ts) sends its groups' with the step's reply.
 */
import type { Span } from '../monitor/span.js';
import type { GroupExchange } from '../pipeline/events.js';
import type { ParameterGroup } from '../model/parameter-layout.js';
import type { FromComm } from './protocol.js';

export type ExchangedReport = Extract<FromComm, { type: 'exchanged' }>;

/** What went on the wire for a group: one entry per unit sent (a group, or a chunk of one). */
export type Sent = { start: number; end: number; label: string }[];

/** The report of `done`, updated on `thread` of device `rank`, after `sent` carried `wireFloats` floats. */
export function exchangedReport(
  rank: number,
  groups: readonly ParameterGroup[],
  thread: Span['thread'],
  done: GroupExchange,
  sent: Sent,
  wireFloats: number,
): ExchangedReport {
  const { step, group: g } = done;
  const name = groups[g].name;
  const span = (kind: Span['kind'], label: string, start: number, end: number): Span => ({
    device: rank,
    thread,
    kind,
    name: label,
    step,
    group: g,
    start,
    end,
  });
  const exchanges = sent.map(s => span('exchange', `exchange ${name}${s.label}`, s.start, s.end));
  if (exchanges.length > 0) exchanges[exchanges.length - 1].bytes = 4 * wireFloats;
  const spans = [
    // a compute thread does not wait for its own gradients
    ...(thread === 'comm' ? [span('wait', `wait ${name}`, done.waitStart, done.waitEnd)] : []),
    ...exchanges,
    span('apply', `apply ${name}`, done.applyStart!, done.applyEnd!),
  ];
  return {
    type: 'exchanged',
    device: rank,
    step,
    group: g,
    waitMs: done.waitEnd - done.waitStart,
    exchangeMs: sent.reduce((ms, s) => ms + s.end - s.start, 0),
    updateMs: done.applyEnd! - done.applyStart!,
    spans,
    carried: { start: groups[g].start, end: groups[g].end },
    skipped: done.skipped === true,
    wireFloats,
  };
}
