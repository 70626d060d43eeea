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
 *
 * `meterStepMachine` does the same for the whole machine (/proc/stat: every process and the kernel's own work, and
 * the idle time), which tells the CPU the kernel spends on the network from the time nothing runs.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/**
 * ms of CPU (user + system) used so far by every live thread of `pid` (`mainOnly`: its main thread alone, whose
 * thread id is the pid); undefined when /proc cannot tell.
 */
export function processCpuMs(pid: number, mainOnly = false): number | undefined {
  let ticks = 0;
  try {
    for (const tid of mainOnly ? [String(pid)] : readdirSync(`/proc/${pid}/task`)) ticks += threadStat(pid, tid).ticks;
  } catch {
    return undefined;
  }
  return ticksToMs(ticks);
}

/**
 * Thread `tid` of `pid` ('self': this process): its name and CPU time so far (user + system) in clock ticks. Throws
 * where /proc cannot tell (the thread ended, not Linux).
 */
export function threadStat(pid: number | 'self', tid: string): { name: string; ticks: number } {
  return parseStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
}

/**
 * ms of CPU (user + system) this whole process has used so far, its threads that have ended included
 * (/proc/self/stat); throws where /proc cannot tell.
 */
export function ownCpuMs(): number {
  return ticksToMs(parseStat(readFileSync('/proc/self/stat', 'utf8')).ticks);
}

/** A stat file's name and CPU time in clock ticks: utime + stime (fields 14 and 15). */
function parseStat(stat: string): { name: string; ticks: number } {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
    ticks: Number(fields[11]) + Number(fields[12]),
  };
}

/** Clock ticks (threadStat's unit) in ms. */
export function ticksToMs(ticks: number): number {
  return (ticks * 1000) / clockTicks();
}

/**
 * The machine's CPU time so far, every CPU, from /proc/stat's first line (ms): `busyMs` user, nice, system, irq,
 * softirq and steal — the kernel's work for the network included, whichever process it ran on behalf of — and
 * `idleMs` idle and iowait; `kernelMs` system, irq and softirq alone. Undefined when /proc cannot tell.
 */
export interface MachineCpu {
  busyMs: number;
  idleMs: number;
  kernelMs: number;
}

export function machineCpuMs(): MachineCpu | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const ms = (ticks: number) => (ticks * 1000) / clockTicks();
    return {
      busyMs: ms(user + nice + system + irq + softirq + (steal || 0)),
      idleMs: ms(idle + iowait),
      kernelMs: ms(system + irq + softirq),
    };
  } catch {
    return undefined;
  }
}

/**
 * Reads `read()` when `child`'s `--json` stdout prints step `from` and step `to`; the getter gives both readings
 * (undefined: one was not seen, or `read` could not tell).
 */
function readAtSteps<T>(
  child: ChildProcess,
  from: number,
  to: number,
  read: () => T | undefined,
): () => { atFrom: T; atTo: T } | undefined {
  let atFrom: T | undefined,
    atTo: T | undefined,
    pending = '';
  const marks = new Map([
    [
      `"event":"step","step":${from},`,
      (v: T) => {
        atFrom = v;
      },
    ],
    [
      `"event":"step","step":${to},`,
      (v: T) => {
        atTo = v;
      },
    ],
  ]);
  child.stdout?.on('data', (chunk: string | Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      for (const [mark, set] of marks) {
        if (!line.includes(mark)) continue;
        const v = read();
        if (v !== undefined) set(v);
      }
    }
  });
  return () => (atFrom === undefined || atTo === undefined || to <= from ? undefined : { atFrom, atTo });
}

/**
 * Reads `child`'s CPU (`mainOnly`: its main thread's) when its `--json` stdout prints step `from` and step `to`; the
 * getter gives ms of CPU per step between.
 */
export function meterStepCpu(
  child: ChildProcess,
  from: number,
  to: number,
  mainOnly = false,
): () => number | undefined {
  const readings = readAtSteps(child, from, to, () =>
    child.pid === undefined ? undefined : processCpuMs(child.pid, mainOnly),
  );
  return () => {
    const r = readings();
    return r && (r.atTo - r.atFrom) / (to - from);
  };
}

/** The machine's CPU (every CPU, every process and the kernel) per step between `child`'s steps `from` and `to`. */
export function meterStepMachine(child: ChildProcess, from: number, to: number): () => MachineCpu | undefined {
  const readings = readAtSteps(child, from, to, machineCpuMs);
  return () => {
    const r = readings();
    const per = (k: keyof MachineCpu) => (r!.atTo[k] - r!.atFrom[k]) / (to - from);
    return r && { busyMs: per('busyMs'), idleMs: per('idleMs'), kernelMs: per('kernelMs') };
  };
}
