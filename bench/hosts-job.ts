/**
 * One job of the hosts bench: a command on each of the two hosts (network
 * namespaces of a HostPair) at once, or one command here, their stdout collected, their stderr's
 * tail kept for the error. When one host fails, or the job runs past its
 * time, all are killed (SIGKILL: the process itself, as `ip netns exec`
 * execs it) and the job rejects naming the host, its exit and its stderr.
 * `killRunningJobs()` kills every job still running (the bench's cleanup on
 * a signal or an error).
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import type { HostPair } from './network-namespaces.js';

export interface HostCommand {
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
}

const running = new Set<ChildProcess>();

/** Kills every child of a job still running. */
export function killRunningJobs(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

const STDERR_TAIL = 15;

/** Each process's stdout; `hungAtExit`: the processes killed after printing all they had to (see runOnHosts). */
export interface JobOutput {
  outs: string[];
  hungAtExit: number[];
}

/** How long a process that printed all it had to may outlive another's clean exit before it is killed. */
export const EXIT_GRACE_MS = 20_000;

/**
 * Runs `commands[h]` on host h of `net`; resolves with each host's stdout once both exited 0. With `printedAll`:
 * when one host exited 0 and the other's stdout already satisfies `printedAll`, the other gets EXIT_GRACE_MS
 * to exit, then is killed and listed in `hungAtExit` (its output is used; the caller says so).
 */
export function runOnHosts(
  net: HostPair,
  commands: readonly [HostCommand, HostCommand],
  timeoutMs: number,
  label: string,
  printedAll?: (stdout: string) => boolean,
  onStart?: OnStart,
): Promise<JobOutput> {
  return runJob(
    commands.map((c, h) => () => net.spawn(h as 0 | 1, c.command, c.args, options(c))),
    timeoutMs,
    label,
    printedAll,
    onStart,
  );
}

/**
 * Called with each process as it starts (its stdout already decoding as utf8): e.g. to meter its CPU (process-cpu.ts).
 */
export type OnStart = (index: number, child: ChildProcess) => void;

/** Runs `command` here (no namespace), killed like a host's on a failure or a signal; resolves with its stdout. */
export async function runHere(command: HostCommand, timeoutMs: number, label: string): Promise<string> {
  const { outs } = await runJob([() => spawn(command.command, command.args, options(command))], timeoutMs, label);
  return outs[0];
}

/**
 * Runs `commands` here at once (no namespace), killed together on a failure or a signal; resolves with each one's
 * stdout.
 */
export async function runAllHere(
  commands: readonly HostCommand[],
  timeoutMs: number,
  label: string,
  onStart?: OnStart,
): Promise<string[]> {
  const { outs } = await runJob(
    commands.map(c => () => spawn(c.command, c.args, options(c))),
    timeoutMs,
    label,
    undefined,
    onStart,
  );
  return outs;
}

function options(c: HostCommand): SpawnOptions {
  return { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...c.env } };
}

/** Starts every process at once; resolves with their stdout when all exited 0, else kills them all and rejects. */
function runJob(
  starts: (() => ChildProcess)[],
  timeoutMs: number,
  label: string,
  printedAll?: (stdout: string) => boolean,
  onStart?: OnStart,
): Promise<JobOutput> {
  return new Promise((resolve, reject) => {
    const outs = starts.map(() => '');
    const tails: string[][] = starts.map(() => []);
    const hungAtExit: number[] = [];
    let left = starts.length;
    let settled = false;
    let grace: NodeJS.Timeout | undefined;
    const children = starts.map(start => start());
    const who = (i: number): string => (children.length === 1 ? 'the process' : `host ${i}`);
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(grace);
      for (const c of children) {
        if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
        running.delete(c);
      }
      const tail = tails.map((t, i) => `--- ${who(i)}: stderr (tail) ---\n${t.join('\n')}`).join('\n');
      reject(new Error(`hosts bench: ${label}: ${why}\n${tail}`));
    };
    const timer = setTimeout(() => fail(`timed out after ${timeoutMs / 1000} s`), timeoutMs);
    children.forEach((child, i) => {
      running.add(child);
      child.stdout!.setEncoding('utf8').on('data', (s: string) => {
        outs[i] += s;
      });
      onStart?.(i, child);
      child.stderr!.setEncoding('utf8').on('data', (s: string) => {
        tails[i].push(...s.split('\n').filter(l => l.trim() !== ''));
        tails[i].splice(0, Math.max(0, tails[i].length - STDERR_TAIL));
      });
      child.on('error', err => fail(`${who(i)} could not start: ${err.message}`));
      child.on('close', (code, signal) => {
        running.delete(child);
        if (code !== 0) return fail(`${who(i)} exited with ${signal ?? `code ${code}`}`);
        if (--left === 0 && !settled) {
          settled = true;
          clearTimeout(timer);
          clearTimeout(grace);
          resolve({ outs, hungAtExit });
        } else if (printedAll !== undefined && grace === undefined) {
          grace = setTimeout(() => {
            children.forEach((c, j) => {
              if (c.exitCode !== null || c.signalCode !== null) return;
              if (!printedAll(outs[j]))
                return fail(`${who(j)} did not finish within ${EXIT_GRACE_MS / 1000} s of ${who(i)}'s exit`);
              hungAtExit.push(j);
              c.removeAllListeners('close');
              c.once('close', () => {
                running.delete(c);
                if (--left === 0 && !settled) {
                  settled = true;
                  clearTimeout(timer);
                  resolve({ outs, hungAtExit });
                }
              });
              c.kill('SIGKILL');
            });
          }, EXIT_GRACE_MS);
        }
      });
    });
  });
}

/** The JSON lines of a process's stdout (other lines skipped). */
export function jsonLines(stdout: string): Record<string, unknown>[] {
  const lines: Record<string, unknown>[] = [];
  for (const line of stdout.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(t) as Record<string, unknown>);
    } catch {
      /* a human line that starts with { */
    }
  }
  return lines;
}
