/**
 * The CPU time a running process has used, every thread of it, read from
 * /proc (Linux): what the hosts bench uses to say how much of the machine a
 * step takes. `meterStepCpu` watches a tandem process's `--json` stdout and
 * reads its CPU when step `from` and step `to` are printed, so the CPU per
 * step of the steps between (from, to] — the timed ones, not start-up.
 *
 *   const cpu = meterStepCpu(child, 4, 11);   // steps 5..11
 *   ...
 *   cpu();                                    // ms of CPU per step, or undefined (not seen, not Linux)
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try { ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100; } catch { ticksPerSecond = 100; }
  }
  return ticksPerSecond;
}

/** ms of CPU (user + system) used so far by every live thread of `pid`; undefined when /proc cannot tell. */
export function processCpuMs(pid: number): number | undefined {
  let ticks = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);  // utime, stime (fields 14 and 15 of stat)
    }
  } catch {
    return undefined;
  }
  return (ticks * 1000) / clockTicks();
}

/** Reads `child`'s CPU when its `--json` stdout prints step `from` and step `to`; the getter gives ms of CPU per step between. */
export function meterStepCpu(child: ChildProcess, from: number, to: number): () => number | undefined {
  let atFrom: number | undefined, atTo: number | undefined, pending = '';
  const marks = new Map([[`"event":"step","step":${from},`, (ms: number) => { atFrom = ms; }], [`"event":"step","step":${to},`, (ms: number) => { atTo = ms; }]]);
  child.stdout?.on('data', (chunk: string | Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      for (const [mark, set] of marks) {
        if (!line.includes(mark) || child.pid === undefined) continue;
        const ms = processCpuMs(child.pid);
        if (ms !== undefined) set(ms);
      }
    }
  });
  return () => (atFrom === undefined || atTo === undefined || to <= from ? undefined : (atTo - atFrom) / (to - from));
}
