/**
 * This process's CPU time by thread, grouped by what each thread does: tandem's own threads by the names they give
 * themselves (src/engine/thread-name.ts: compute, comm, loader, validate), the main thread (its id is the process's),
 * and the rest of Node's (V8's garbage collection and compilation, libuv's pool). The precision bench reads it over
 * its timed steps: where a device's step goes when everything runs on one core.
 *
 * @example
 * const a = readThreadCpu(); ...train 100 steps...; threadCpuPerStep(a!, readThreadCpu()!, 100).comm // ms a step
 */
import { readdirSync } from 'node:fs';
import { THREAD_NAME_PREFIX } from '../src/engine/thread-name.js';
import { threadStat, ticksToMs } from './process-cpu.js';

export const THREAD_GROUPS = ['compute', 'comm', 'loader', 'validate', 'main', 'V8 and Node'] as const;
export type ThreadGroup = (typeof THREAD_GROUPS)[number];
export type ThreadCpu = Record<ThreadGroup, number>;
/** ms of CPU so far per live thread id, and the thread's group. */
export type ThreadReading = Map<string, { group: ThreadGroup; ms: number }>;

function groupOf(tid: string, name: string): ThreadGroup {
  if (tid === String(process.pid)) return 'main';
  if (!name.startsWith(THREAD_NAME_PREFIX)) return 'V8 and Node';
  const role = name.slice(THREAD_NAME_PREFIX.length).replace(/\d+$/, '');
  return (THREAD_GROUPS as readonly string[]).includes(role) ? (role as ThreadGroup) : 'V8 and Node';
}

/** Every live thread's CPU time (user + system) so far; undefined where /proc cannot tell (not Linux). */
export function readThreadCpu(): ThreadReading | undefined {
  const out: ThreadReading = new Map();
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      const { name, ticks } = threadStat('self', tid);
      out.set(tid, { group: groupOf(tid, name), ms: ticksToMs(ticks) });
    }
  } catch {
    return undefined; // a thread that ended mid-read, or no /proc: no split rather than a wrong one
  }
  return out;
}

/** ms of CPU per step by group from reading `a` to `b`, `steps` apart (a thread's group as `b` names it). */
export function threadCpuPerStep(a: ThreadReading, b: ThreadReading, steps: number): ThreadCpu {
  const split = Object.fromEntries(THREAD_GROUPS.map(g => [g, 0])) as ThreadCpu;
  for (const [tid, now] of b) split[now.group] += (now.ms - (a.get(tid)?.ms ?? 0)) / steps;
  return split;
}
