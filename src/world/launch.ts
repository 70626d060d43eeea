/**
 * `tandem launch --hosts N [train flags…]`: N local processes, each
 * `tandem train … --hosts N --host-rank r --rendezvous 127.0.0.1:PORT`, as
 * torchrun's standalone mode: for trying several hosts on one machine, for
 * tests, and later one process per GPU. Every line a host writes is passed on
 * with its rank; SIGINT/SIGTERM/SIGHUP are forwarded to every host; when one
 * host fails (non-zero exit, or killed) the others are stopped, and the
 * launcher exits non-zero naming the first host that failed. Each host has an
 * IPC channel to the launcher, so a host whose launcher is gone aborts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { constants } from 'node:os';
import { once } from 'node:events';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { TandemError } from '../errors.js';

export interface HostLine { stream: 'stdout' | 'stderr'; text: string }

/** How long a stopped host may take to end by itself (its step, its checkpoint) before it is killed. */
const STOP_GRACE_MS = 10_000;
const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const CLI = fileURLToPath(new URL('../cli/main.js', import.meta.url));

/** How one host ended. */
type HostEnd = { kind: 'exited'; host: number; code: number } | { kind: 'killed'; host: number; signal: NodeJS.Signals };

/** `argv`: `--hosts N` and the train flags. Resolves with the launcher's exit code. */
export async function launchHosts(argv: string[], onLine: (host: number, line: HostLine) => void, say: (line: string) => void): Promise<number> {
  const { hosts, trainArgs } = splitLaunchArgs(argv);
  const port = await freePort();
  const children = Array.from({ length: hosts }, (_, host) => startHost(host, hosts, port, trainArgs, onLine));
  say(`${hosts} hosts, rendezvous 127.0.0.1:${port}; pids ${children.map((c, h) => `host ${h}: ${c.pid}`).join(', ')}`);
  let forwarded: NodeJS.Signals | undefined;
  const forward = (signal: NodeJS.Signals) => {
    forwarded ??= signal;
    children.forEach(c => { if (c.exitCode === null && c.signalCode === null) c.kill(signal); });
  };
  for (const s of FORWARDED_SIGNALS) process.on(s, forward);
  let firstFailure: HostEnd | undefined;
  try {
    await Promise.all(children.map(async (child, host) => {
      const end = await hostEnd(child, host);
      if (firstFailure || failed(end) === undefined) return;
      firstFailure = end;
      if (forwarded) return; // every host has the signal already: a second one would abort their stop
      say(`host ${host} ${failed(end)}; stopping the other hosts`);
      stopOthers(children);
    }));
  } finally {
    for (const s of FORWARDED_SIGNALS) process.off(s, forward);
  }
  if (!firstFailure) return 0;
  say(forwarded ? `stopped on ${forwarded}: host ${firstFailure.host} ${failed(firstFailure)}` : `failed: host ${firstFailure.host} ${failed(firstFailure)}`);
  return firstFailure.kind === 'exited' ? firstFailure.code : 128 + (constants.signals[firstFailure.signal] ?? 0);
}

/** `--hosts N` out of the train flags; the flags the launcher sets itself are refused. */
export function splitLaunchArgs(argv: string[]): { hosts: number; trainArgs: string[] } {
  const trainArgs: string[] = [];
  let hosts: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    if (flag === '--host-rank' || flag === '--rendezvous') throw new TandemError('BAD_CONFIG', `tandem launch sets ${flag} for every host itself; leave it out`);
    if (flag !== '--hosts') { trainArgs.push(argv[i]); continue; }
    const text = inline ?? argv[++i];
    hosts = Number(text);
    if (!Number.isInteger(hosts) || hosts < 1 || hosts > 64) throw new TandemError('BAD_CONFIG', `tandem launch --hosts must be an integer in [1, 64], got '${text}'`);
  }
  if (hosts === undefined) throw new TandemError('BAD_CONFIG', 'usage: tandem launch --hosts N [train flags…] (N local processes on 127.0.0.1)');
  return { hosts, trainArgs };
}

function startHost(host: number, hosts: number, port: number, trainArgs: string[], onLine: (host: number, line: HostLine) => void): ChildProcess {
  const env = { ...process.env };
  for (const k of ['TANDEM_HOSTS', 'TANDEM_HOST_RANK', 'TANDEM_RENDEZVOUS']) delete env[k];
  const child = spawn(process.execPath, [CLI, 'train', ...trainArgs, '--hosts', String(hosts), '--host-rank', String(host), '--rendezvous', `127.0.0.1:${port}`],
    // Its own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once (two would abort the stop).
    // The IPC channel: a host whose launcher is gone aborts (cli/launcher-link.ts).
    { env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'], detached: true });
  for (const stream of ['stdout', 'stderr'] as const) {
    readline.createInterface({ input: child[stream]!, crlfDelay: Infinity }).on('line', text => onLine(host, { stream, text }));
  }
  return child;
}

/** Resolves when the host has exited and its output is read to the end. */
async function hostEnd(child: ChildProcess, host: number): Promise<HostEnd> {
  const [code, signal] = await once(child, 'close') as [number | null, NodeJS.Signals | null];
  return signal ? { kind: 'killed', host, signal } : { kind: 'exited', host, code: code ?? 1 };
}

/** What went wrong with a host, in words; undefined when it ended well. */
function failed(end: HostEnd): string | undefined {
  switch (end.kind) {
    case 'exited': return end.code === 0 ? undefined : `exited with code ${end.code}`;
    case 'killed': return `was killed by ${end.signal}`;
    default: { const never: never = end; throw new Error(`unknown host end ${JSON.stringify(never)}`); }
  }
}

/** SIGTERM to every host still running (each ends its step, as on a stop); SIGKILL to any still there after STOP_GRACE_MS. */
function stopOthers(children: ChildProcess[]): void {
  const running = children.filter(c => c.exitCode === null && c.signalCode === null);
  running.forEach(c => c.kill('SIGTERM'));
  const timer = setTimeout(() => running.forEach(c => { if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL'); }), STOP_GRACE_MS);
  timer.unref();
}

/** A port nobody listens on at 127.0.0.1 now (host 0 listens on it a moment later). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}
