/**
 * `tandem launch --hosts N [train flags…]`: N local processes, each
 * `tandem train … --hosts N --host-rank r --rendezvous 127.0.0.1:PORT`, as
 * torchrun's standalone mode: for trying several hosts on one machine and for
 * tests. `tandem launch --gpus N`: one process per GPU of this machine, each
 * with one device, pinned to its GPU by its environment (gpu-pinning.ts) and
 * joined like hosts (process = host × N + gpu); with `--hosts H` the H × N
 * processes of H simulated hosts, and with `--hosts H --host-rank h
 * --rendezvous ADDR` the N processes of host h of a real multi-machine job.
 * Every line a process writes is passed on with its name; SIGINT/SIGTERM/SIGHUP
 * are forwarded to every process; when one fails (non-zero exit, or killed)
 * the others are stopped (in an elastic run, `--min-hosts`, they go on
 * without it unless it is host 0), and the launcher exits non-zero naming the
 * first that failed. Each process has an IPC channel to the launcher, so a process
 * whose launcher is gone aborts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism, constants } from 'node:os';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { TandemError } from '../errors.js';
import { findGpus, hasMesaDeviceSelect, type GpuInventory } from './gpu-inventory.js';
import { PINNING_VARIABLES, planGpus } from './gpu-pinning.js';
import { decimalCount } from '../decimal-count.js';
import { jobSecret, newJobSecret, SECRET_ENV } from './job-secret.js';
import { failed, hostEnd, stopOthers, type HostEnd } from './launch-ends.js';
import { freePort } from './free-port.js';
import { RESTART_ENV } from './join-requests.js';

export { freePort };

export interface HostLine {
  stream: 'stdout' | 'stderr';
  text: string;
}

const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const CLI = fileURLToPath(new URL('../cli/main.js', import.meta.url));
const MAX_LOCAL = 64;

/** `tandem launch`'s own flags, the train flags apart. */
export interface LaunchArgs {
  hosts: number;
  gpus?: number;
  hostRank?: number;
  rendezvous?: string;
  /** How many times a failed process other than host 0 is started again (an elastic run's: --min-hosts). */
  maxRestarts: number;
  trainArgs: string[];
}

/** One process the launcher starts. */
interface Member {
  /** Its rank among the job's processes (the `--host-rank` it is given). */
  rank: number;
  /** What its output lines are prefixed with (without the brackets): `host 1`, `gpu 1`, `host 1 gpu 0`. */
  prefix: string;
  /** Extra environment (a GPU process's pinning). */
  env: Record<string, string>;
  /** Its GPU in words, for a GPU process. */
  gpu?: string;
}

/** The processes to start and where they meet. */
interface LaunchPlan {
  members: Member[];
  world: number;
  rendezvous: string;
  gpus: boolean;
  notes: string[];
}

/** What a launch needs from the machine (tests give a fake inventory). */
export interface LaunchMachine {
  gpus: () => GpuInventory;
  cpus: number;
  deviceSelectLayer: boolean;
}

const thisMachine = (): LaunchMachine => ({
  gpus: () => findGpus(),
  cpus: availableParallelism(),
  deviceSelectLayer: hasMesaDeviceSelect(),
});

/**
 * The checks `tandem train` makes of its command line before it starts anything (its flags parsed, its config
 * resolved, its output places probed and their run lock free), failing as train fails: the launcher runs them on
 * the first process's command line (host 0's, the writer, when it starts host 0) before it starts any.
 */
export type TrainArgsCheck = (trainArgs: string[]) => Promise<void>;

/**
 * `argv`: `--hosts N` and/or `--gpus N`, and the train flags. `onLine` gets each line with its process's prefix.
 * `checkTrain` sees the first process's train flags before any process starts (a bad flag, --out or lock fails there,
 * as train). Resolves with the launcher's exit code.
 */
export async function launchHosts(
  argv: string[],
  onLine: (prefix: string, line: HostLine) => void,
  say: (line: string) => void,
  checkTrain: TrainArgsCheck,
  machine: LaunchMachine = thisMachine(),
): Promise<number> {
  const args = splitLaunchArgs(argv);
  const plan = await planLaunch(args, machine);
  giveJobSecret(args);
  await checkTrain(memberTrainArgs(plan.members[0], plan, args.trainArgs));
  const children = plan.members.map(m => startHost(m, plan, args.trainArgs, onLine));
  const name = (i: number) =>
    plan.gpus ? `GPU process ${plan.members[i].rank} (pid ${children[i].pid})` : `host ${plan.members[i].rank}`;
  // the processes the launcher itself sent SIGKILL (stopOthers, past the grace): any other SIGKILL came from outside
  const killedByUs = new Set<ChildProcess>();
  const failure = (end: HostEnd) => failed(end, children[end.member].pid, killedByUs.has(children[end.member]));
  announce(plan, children, say);
  const signals = forwardSignals(children);
  let firstFailure: HostEnd | undefined; // and the processes of an elastic run lost for good (not host 0):
  const lost: HostEnd[] = [];
  try {
    await Promise.all(
      children.map(async (_, i) => {
        let end = await hostEnd(children[i], i);
        // an elastic run's host (not host 0: it serves the store) is started again, and asks to rejoin the run
        const restartable = () => !firstFailure && !signals.received() && plan.members[i].rank !== 0;
        for (let n = 1; n <= args.maxRestarts && failure(end) !== undefined && restartable(); n++) {
          const was = `${name(i)} ${failure(end)}`;
          children[i] = startHost(plan.members[i], plan, args.trainArgs, onLine, n);
          say(`${was}; restarting it (restart ${n} of --max-restarts ${args.maxRestarts}, pid ${children[i].pid})`);
          end = await hostEnd(children[i], i);
        }
        if (firstFailure || failure(end) === undefined) return;
        const others = plan.gpus ? 'GPU processes' : 'hosts';
        if (givesMinHosts(args.trainArgs) && !signals.received() && plan.members[i].rank !== 0) {
          // the others regroup without it (or end by themselves, below --min-hosts): stopping them would end the run
          lost.push(end);
          say(
            `${name(i)} ${failure(end)}${spent(args.maxRestarts)}; the other ${others} go on without it (--min-hosts)`,
          );
          return;
        }
        firstFailure = end;
        if (signals.received()) return; // every process has the signal already: a second one would abort their stop
        say(`${name(i)} ${failure(end)}; stopping the other ${others}`);
        stopOthers(children, killedByUs);
      }),
    );
  } finally {
    signals.dispose();
  }
  const forwarded = signals.received();
  const first = lost[0] ?? firstFailure;
  if (!first) return 0;
  const lines = [...lost, ...(firstFailure ? [firstFailure] : [])].map(e => `${name(e.member)} ${failure(e)}`);
  say(forwarded ? `stopped on ${forwarded}: ${lines[0]}` : `failed: ${endWords(lines, !firstFailure, plan.gpus)}`);
  return first.kind === 'exited' ? first.code : 128 + (constants.signals[first.signal] ?? 0);
}

/** SIGINT/SIGTERM/SIGHUP forwarded to every process still running (`children`, as it changes), until disposed. */
function forwardSignals(children: ChildProcess[]): { received: () => NodeJS.Signals | undefined; dispose: () => void } {
  let forwarded: NodeJS.Signals | undefined;
  const forward = (signal: NodeJS.Signals) => {
    forwarded ??= signal;
    children.forEach(c => {
      if (c.exitCode === null && c.signalCode === null) c.kill(signal);
    });
  };
  for (const s of FORWARDED_SIGNALS) process.on(s, forward);
  return {
    received: () => forwarded,
    dispose: () => FORWARDED_SIGNALS.forEach(s => process.off(s, forward)),
  };
}

const spent = (maxRestarts: number) => (maxRestarts > 0 ? `, its --max-restarts ${maxRestarts} spent` : '');

/**
 * The launch's failure in words: each process lost (`ended`: the others went on without them and ended well), else
 * the first that failed.
 */
function endWords(failures: string[], wentOn: boolean, gpus: boolean): string {
  if (!wentOn) return failures[0];
  const them = failures.length > 1 ? 'them' : 'it';
  return `${failures.join('; ')}; the other ${gpus ? 'GPU processes' : 'hosts'} went on without ${them} and ended well`;
}

/**
 * The hosts a launcher starts all of share a secret it makes (as horovodrun does), in the environment they inherit,
 * unless the user gave one (TANDEM_JOB_SECRET, --job-secret-file). One host of a job of several machines (--host-rank)
 * cannot make it: every machine needs the same, the user's.
 */
function giveJobSecret(args: LaunchArgs): void {
  const named = args.trainArgs.some(a => a === '--job-secret-file' || a.startsWith('--job-secret-file='));
  if (args.hostRank === undefined && !named && !jobSecret()) process.env[SECRET_ENV] = newJobSecret();
}

/** The processes of this launch: hosts, or GPU processes pinned by the machine's GPUs. */
async function planLaunch(args: LaunchArgs, machine: LaunchMachine): Promise<LaunchPlan> {
  const rendezvous = args.rendezvous ?? `127.0.0.1:${await freePort()}`;
  if (args.gpus === undefined) {
    const members = Array.from({ length: args.hosts }, (_, h) => ({ rank: h, prefix: `host ${h}`, env: {} }));
    return { members, world: args.hosts, rendezvous, gpus: false, notes: [] };
  }
  const gpus = args.gpus;
  const { pins, notes } = planGpus(machine.gpus(), gpus, {
    cpus: machine.cpus,
    deviceSelectLayer: machine.deviceSelectLayer,
  });
  const hosts = args.hostRank !== undefined ? [args.hostRank] : Array.from({ length: args.hosts }, (_, h) => h);
  const members = hosts.flatMap(h =>
    pins.map((p, g) => ({
      rank: h * gpus + g,
      prefix: args.hosts > 1 ? `host ${h} gpu ${g}` : `gpu ${g}`,
      env: p.env,
      gpu: p.gpu,
    })),
  );
  return { members, world: args.hosts * gpus, rendezvous, gpus: true, notes };
}

function announce(plan: LaunchPlan, children: ChildProcess[], say: (line: string) => void): void {
  if (!plan.gpus) {
    say(
      `${plan.members.length} hosts, rendezvous ${plan.rendezvous}; pids ` +
        `${children.map((c, h) => `host ${h}: ${c.pid}`).join(', ')}`,
    );
    return;
  }
  say(`${plan.members.length} GPU process(es) of a job of ${plan.world}, rendezvous ${plan.rendezvous}`);
  plan.members.forEach((m, i) => say(`GPU process ${m.rank} (pid ${children[i].pid}) [${m.prefix}]: ${m.gpu}`));
  plan.notes.forEach(say);
}

/**
 * `--hosts N` and `--gpus N` (and, with --gpus, `--host-rank`, `--rendezvous`) out of the train flags; the flags the
 * launcher sets itself are refused.
 */
export function splitLaunchArgs(argv: string[]): LaunchArgs {
  const { own, trainArgs } = launcherFlags(argv);
  if (own.gpus === undefined) {
    for (const f of ['host-rank', 'rendezvous'] as const)
      if (own[f] !== undefined)
        throw new TandemError('BAD_CONFIG', `tandem launch sets --${f} for every host itself; leave it out`);
    if (own.hosts === undefined)
      throw new TandemError(
        'BAD_CONFIG',
        'usage: tandem launch --hosts N [train flags…] (N local processes on 127.0.0.1), or tandem launch --gpus N ' +
          '[--hosts H] [train flags…] (a process per GPU)',
      );
    return { hosts: count('hosts', own.hosts, MAX_LOCAL), maxRestarts: restartsOf(own, trainArgs), trainArgs };
  }
  if (trainArgs.some(a => a === '--devices' || a.startsWith('--devices=')))
    throw new TandemError('BAD_CONFIG', 'tandem launch --gpus gives every GPU process one device; leave out --devices');
  const out: LaunchArgs = {
    hosts: own.hosts === undefined ? 1 : count('hosts', own.hosts, 1024),
    gpus: count('gpus', own.gpus, MAX_LOCAL),
    maxRestarts: restartsOf(own, trainArgs),
    trainArgs,
  };
  if (
    (own['host-rank'] === undefined) !== (own.rendezvous === undefined) ||
    (own['host-rank'] !== undefined && out.hosts < 2)
  ) {
    throw new TandemError(
      'BAD_CONFIG',
      'tandem launch --gpus N on one host of several takes --hosts H --host-rank R --rendezvous HOST:PORT together ' +
        "(host 0's address); on one machine leave out --host-rank and --rendezvous",
    );
  }
  if (own['host-rank'] !== undefined) {
    const rank = decimalCount(own['host-rank']);
    if (rank === undefined || rank >= out.hosts)
      throw new TandemError(
        'BAD_CONFIG',
        `tandem launch --host-rank must be an integer in [0, ${out.hosts}), got '${own['host-rank']}'`,
      );
    out.hostRank = rank;
    out.rendezvous = own.rendezvous;
  } else if (out.hosts * out.gpus! > MAX_LOCAL) {
    throw new TandemError(
      'BAD_CONFIG',
      `tandem launch --hosts ${out.hosts} --gpus ${out.gpus}: ${out.hosts * out.gpus!} local processes, more than ` +
        `${MAX_LOCAL}`,
    );
  }
  return out;
}

const LAUNCHER_FLAGS = ['hosts', 'gpus', 'host-rank', 'rendezvous', 'max-restarts'] as const;
type LauncherFlag = (typeof LAUNCHER_FLAGS)[number];
const MAX_RESTARTS = 100;

/** The launcher's own flags (each given once) apart from the train flags, in their order. */
function launcherFlags(argv: string[]): { own: Partial<Record<LauncherFlag, string>>; trainArgs: string[] } {
  const trainArgs: string[] = [];
  const own: Partial<Record<LauncherFlag, string>> = {};
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const key = LAUNCHER_FLAGS.find(f => flag === `--${f}`);
    if (key === undefined) {
      trainArgs.push(argv[i]);
      continue;
    }
    const value = inline ?? argv[++i];
    if (own[key] !== undefined)
      throw new TandemError(
        'BAD_CONFIG',
        `tandem launch --${key} is given twice ('${own[key]}', then '${value}'): give it once`,
      );
    own[key] = value;
  }
  return { own, trainArgs };
}

/**
 * `--max-restarts K` (default 0): restarting a host makes sense only in an elastic run, which admits it again; a run
 * that is not elastic ends when a host is lost.
 */
function restartsOf(own: Partial<Record<LauncherFlag, string>>, trainArgs: string[]): number {
  if (own['max-restarts'] === undefined) return 0;
  const n = decimalCount(own['max-restarts']);
  if (n === undefined || n > MAX_RESTARTS)
    throw new TandemError(
      'BAD_CONFIG',
      `tandem launch --max-restarts must be an integer in [0, ${MAX_RESTARTS}], got '${own['max-restarts']}'`,
    );
  if (n > 0 && !givesMinHosts(trainArgs))
    throw new TandemError(
      'BAD_CONFIG',
      'tandem launch --max-restarts restarts a lost host into an elastic run, which admits it again: give ' +
        '--min-hosts M too (a run that is not elastic ends when a host is lost)',
    );
  return n;
}

/** An elastic run's flags: a lost host other than host 0 does not end it. */
const givesMinHosts = (trainArgs: string[]) => trainArgs.some(a => a === '--min-hosts' || a.startsWith('--min-hosts='));

function count(flag: string, text: string | undefined, max: number): number {
  const n = text === undefined ? undefined : decimalCount(text);
  if (n === undefined || n < 1 || n > max)
    throw new TandemError('BAD_CONFIG', `tandem launch --${flag} must be an integer in [1, ${max}], got '${text}'`);
  return n;
}

function startHost(
  m: Member,
  plan: LaunchPlan,
  trainArgs: string[],
  onLine: (prefix: string, line: HostLine) => void,
  restart?: number,
): ChildProcess {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // A GPU process's pinning replaces the launcher's own (a host keeps what the user set: CUDA_VISIBLE_DEVICES,
  // DRI_PRIME…).
  for (const k of [
    'TANDEM_HOSTS',
    'TANDEM_HOST_RANK',
    'TANDEM_RENDEZVOUS',
    RESTART_ENV,
    ...(plan.gpus ? PINNING_VARIABLES : []),
  ])
    delete env[k];
  Object.assign(env, m.env);
  // a restarted host that finds host 0's store gone ends at once: the run ended meanwhile (join-requests.ts)
  if (restart !== undefined) env[RESTART_ENV] = String(restart);
  const child = spawn(
    process.execPath,
    [CLI, 'train', ...memberTrainArgs(m, plan, trainArgs)],
    // Its own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once (two would abort the
    // stop).
    // The IPC channel: a process whose launcher is gone aborts (cli/launcher-link.ts).
    { env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'], detached: true },
  );
  for (const stream of ['stdout', 'stderr'] as const) {
    readline
      .createInterface({ input: child[stream]!, crlfDelay: Infinity })
      .on('line', text => onLine(m.prefix, { stream, text }));
  }
  return child;
}

/**
 * The `tandem train` flags of process `m`: the user's, with its one device (a GPU process) and its place in the world.
 */
function memberTrainArgs(m: Member, plan: LaunchPlan, trainArgs: string[]): string[] {
  const world =
    plan.world > 1
      ? ['--hosts', String(plan.world), '--host-rank', String(m.rank), '--rendezvous', plan.rendezvous]
      : [];
  return [...trainArgs, ...(plan.gpus ? ['--devices', '1'] : []), ...world];
}
