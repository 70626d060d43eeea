/**
 * Chrome trace export (the JSON trace event format: opens in Perfetto and
 * chrome://tracing). One process per device, two threads each: compute and
 * comm; every span a complete ('X') event, timestamps in microseconds from
 * the first span. Written atomically (a temporary file, then renamed).
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

export function chromeTrace(spans: readonly Span[], metadata: Record<string, unknown> = {}): { traceEvents: TraceEvent[]; metadata: Record<string, unknown> } {
  const origin = spans.reduce((m, s) => Math.min(m, s.start), Infinity);
  const events: TraceEvent[] = [];
  const devices = [...new Set(spans.map(s => s.device))].sort((a, b) => a - b);
  for (const d of devices) {
    events.push({ name: 'process_name', ph: 'M', pid: d, tid: 0, args: { name: `device ${d}` } });
    events.push({ name: 'thread_name', ph: 'M', pid: d, tid: 0, args: { name: 'compute' } });
    events.push({ name: 'thread_name', ph: 'M', pid: d, tid: 1, args: { name: 'comm' } });
  }
  for (const s of spans) {
    events.push({
      name: s.name, cat: s.kind, ph: 'X', pid: s.device, tid: s.thread === 'compute' ? 0 : 1,
      ts: Math.round((s.start - origin) * 1000), dur: Math.max(0, Math.round((s.end - s.start) * 1000)),
      args: { step: s.step, ...(s.group === undefined ? {} : { group: s.group }) },
    });
  }
  return { traceEvents: events, metadata: { generatedBy: 'tandem', ...metadata } };
}

export async function writeChromeTrace(file: string, spans: readonly Span[], metadata: Record<string, unknown> = {}): Promise<string> {
  await makeDirectory(path.dirname(path.resolve(file)), `trace ${file}`);
  return writeFileAtomically(file, JSON.stringify(chromeTrace(spans, metadata)));
}
