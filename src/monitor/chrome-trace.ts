/**
 * Chrome trace export (the JSON trace event format: opens in Perfetto and
 * chrome://tracing). One process per device, two threads each: compute and
 * comm; several hosts (spans that carry `host`): one process per host, two
 * threads per device ("device d compute", "device d comm"). Every span a
 * complete ('X') event, timestamps in microseconds from the first span (each
 * host's wall clock: hosts whose clocks disagree are shifted by as much).
 * Written atomically (a temporary file, then renamed).
 */
import path from 'node:path';
import type { Span } from './span.js';
import { writeFileAtomically } from '../output/atomic-write.js';
import { makeDirectory } from '../output/make-directory.js';

interface TraceEvent {
  name: string;
  cat?: string;
  ph: 'X' | 'M';
  ts?: number;
  dur?: number;
  pid: number;
  tid: number;
  args?: Record<string, unknown>;
}

export function chromeTrace(
  spans: readonly Span[],
  metadata: Record<string, unknown> = {},
): { traceEvents: TraceEvent[]; metadata: Record<string, unknown> } {
  const origin = spans.reduce((m, s) => Math.min(m, s.start), Infinity);
  const events: TraceEvent[] = [];
  const hosts = spans.some(s => s.host !== undefined);
  const place = (s: Pick<Span, 'device' | 'host' | 'thread'>) =>
    hosts
      ? { pid: s.host ?? 0, tid: 2 * s.device + (s.thread === 'compute' ? 0 : 1) }
      : { pid: s.device, tid: s.thread === 'compute' ? 0 : 1 };
  const threads = [
    ...new Map(spans.map(s => [`${s.host ?? 0}/${s.device}`, { host: s.host, device: s.device }])).values(),
  ].sort((a, b) => (a.host ?? 0) - (b.host ?? 0) || a.device - b.device);
  const named = new Set<number>();
  for (const t of threads) {
    const pid = place({ ...t, thread: 'compute' }).pid;
    if (!named.has(pid))
      events.push({
        name: 'process_name',
        ph: 'M',
        pid,
        tid: 0,
        args: { name: hosts ? `host ${pid}` : `device ${pid}` },
      });
    named.add(pid);
    for (const thread of ['compute', 'comm'] as const) {
      events.push({
        name: 'thread_name',
        ph: 'M',
        ...place({ ...t, thread }),
        args: { name: hosts ? `device ${t.device} ${thread}` : thread },
      });
    }
  }
  for (const s of spans) {
    events.push({
      name: s.name,
      cat: s.kind,
      ph: 'X',
      ...place(s),
      ts: Math.round((s.start - origin) * 1000),
      dur: Math.max(0, Math.round((s.end - s.start) * 1000)),
      args: {
        step: s.step,
        ...(s.group === undefined ? {} : { group: s.group }),
        ...(hosts ? { device: s.device } : {}),
      },
    });
  }
  return { traceEvents: events, metadata: { generatedBy: 'tandem', ...metadata } };
}

export async function writeChromeTrace(
  file: string,
  spans: readonly Span[],
  metadata: Record<string, unknown> = {},
): Promise<string> {
  await makeDirectory(path.dirname(path.resolve(file)), `trace ${file}`);
  return writeFileAtomically(file, JSON.stringify(chromeTrace(spans, metadata)));
}
