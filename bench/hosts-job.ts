/**
 * One job of the hosts bench: a command on each of the two hosts (network
 * namespaces of a HostPair) at once, their stdout collected, their stderr's
 * tail kept for the error. When one host fails, or the job runs past its
 * time, both are killed (SIGKILL: the process itself, as `ip netns exec`
 * execs it) and the job rejects naming the host, its exit and its stderr.
 * `killRunningJobs()` kills every job still running (the bench's cleanup on
 * a signal or an error).
 */
import type { ChildProcess } from 'node:child_process';
import type { HostPair } from './network-namespaces.js';

export interface HostCommand { command: string; args: string[]; env?: NodeJS.ProcessEnv }

const running = new Set<ChildProcess>();

/** Kills every child of a job still running. */
export function killRunningJobs(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

const STDERR_TAIL = 15;

/** Runs `commands[h]` on host h of `net`; resolves with each host's stdout once both exited 0. */
export function runOnHosts(net: HostPair, commands: readonly [HostCommand, HostCommand], timeoutMs: number, label: string): Promise<[string, string]> {
  return new Promise((resolve, reject) => {
    const outs: [string, string] = ['', ''];
    const tails: [string[], string[]] = [[], []];
    const exited: [boolean, boolean] = [false, false];
    let settled = false;
    const children = ([0, 1] as const).map(h => net.spawn(h, commands[h].command, commands[h].args,
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...commands[h].env } }));
    const stopAll = (): void => { for (const c of children) { if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); running.delete(c); } };
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stopAll();
      const tail = ([0, 1] as const).map(h => `--- host ${h} stderr (tail) ---\n${tails[h].join('\n')}`).join('\n');
      reject(new Error(`hosts bench: ${label}: ${why}\n${tail}`));
    };
    const timer = setTimeout(() => fail(`timed out after ${timeoutMs / 1000} s`), timeoutMs);
    children.forEach((child, h) => {
      running.add(child);
      child.stdout!.setEncoding('utf8').on('data', (s: string) => { outs[h] += s; });
      child.stderr!.setEncoding('utf8').on('data', (s: string) => {
        tails[h].push(...s.split('\n').filter(l => l.trim() !== ''));
        tails[h].splice(0, Math.max(0, tails[h].length - STDERR_TAIL));
      });
      child.on('error', err => fail(`host ${h} could not start ${commands[h].command}: ${err.message}`));
      child.on('close', (code, signal) => {
        running.delete(child);
        exited[h] = true;
        if (code !== 0) return fail(`host ${h} exited with ${signal ?? `code ${code}`}`);
        if (exited[0] && exited[1] && !settled) {
          settled = true;
          clearTimeout(timer);
          resolve(outs);
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
    try { lines.push(JSON.parse(t) as Record<string, unknown>); } catch { /* a human line that starts with { */ }
  }
  return lines;
}
