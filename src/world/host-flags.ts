/**
 * The flags every host of a run must share: what decides the world's groups,
 * batches and steps. Every host runs the same command; a host that does not
 * (one with `--strategy auto` beside one without, other steps or batch) would
 * otherwise wait for the others in a phase they never reach — auto's
 * profiling, a communicator of other groups — until a timeout that names no
 * cause. Each host publishes its flags when it joins the rendezvous store and
 * compares them with host 0's (HostChannel.agreeOnFlags): a difference is
 * BAD_CONFIG, naming the flag and both values, before any step. Paths (model,
 * data, outputs, resume) may differ between machines and are not compared.
 */
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { scheduleIdentity } from '../optim/lr-schedule.js';

export type HostFlags = Record<string, string>;

/**
 * This host's flags. `auto`: the run's strategy is `--strategy auto` (auto's choices, hook included, are host 0's);
 * `minHosts`: an elastic run's --min-hosts (a host without it would end at a loss its peers go on from).
 */
export function hostFlags(cfg: ResolvedConfig, auto: boolean, minHosts?: number): HostFlags {
  const flags: Record<string, unknown> = {
    devices: cfg.devices,
    batch: cfg.batch,
    accumulate: cfg.accumulate > 1 ? cfg.accumulate : undefined,
    steps: cfg.steps,
    'sample shape': cfg.sampleShape,
    classes: cfg.classes,
    'dataset size': cfg.datasetSize,
    method: cfg.method,
    optimizer: cfg.optimizer,
    'lr schedule': scheduleIdentity(cfg.lrSchedule),
    seed: cfg.seed,
    shuffle: cfg.shuffle, // like the seed, the order of the data: a host without it trains on other batches
    strategy: auto ? 'auto' : cfg.strategy,
    'comm hook': auto ? undefined : (cfg.commHook?.name ?? 'none'),
    'checkpoint every': cfg.checkpointEvery ?? 0,
    transport: cfg.transport,
    loss: cfg.loss ?? 'from the model',
    'min hosts': minHosts,
  };
  const out: HostFlags = {};
  for (const [name, value] of Object.entries(flags)) if (value !== undefined) out[name] = JSON.stringify(value);
  return out;
}

/** `strategy: "auto" here, "sequential" on host 1`, one per flag that differs (either side's missing ones included). */
export function flagDifferences(mine: HostFlags, theirs: HostFlags, here: string, there: string): string[] {
  // auto's hook is host 0's choice: the strategy names it
  const auto = mine.strategy === '"auto"' || theirs.strategy === '"auto"';
  const names = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])].filter(n => !(auto && n === 'comm hook'));
  return names
    .filter(n => mine[n] !== theirs[n])
    .map(n => `${n}: ${mine[n] ?? 'not set'} ${here}, ${theirs[n] ?? 'not set'} ${there}`);
}

/**
 * Host `host`'s flags as `get` reads them from the store: a host that never published them within the setup wait
 * (never started, started with another --host-rank or --rendezvous, or cannot reach the store) is named, with what
 * to check, instead of the store's bare "key 'tandem.host1.flags' was not set".
 */
export async function readHostFlags(get: () => Promise<Buffer>, who: string, me: string): Promise<HostFlags> {
  try {
    return JSON.parse((await get()).toString()) as HostFlags;
  } catch (err) {
    if (!(err instanceof TandemError && err.code === 'STALLED' && /was not set within/.test(err.message))) throw err;
    throw new TandemError(
      'STALLED',
      `${who} did not join the rendezvous in time (${me} waited; ${err.message}): start it with the same command ` +
        `and its own --host-rank and the same --rendezvous, and check that it reaches host 0's address; the wait is ` +
        `the setup watchdog (60 s, or --stall-timeout-ms when longer)`,
    );
  }
}

/**
 * The model a host built, as flags to compare (model paths may differ between machines, the model may not): a host
 * with another model would otherwise exchange gradients of another length and end with other weights, silently.
 */
export function modelFlags(built: { weights: { name: string; shape: number[] }[]; layout: { total: number } }) {
  const { weights, layout } = built;
  const shapes = weights.map(w => `${w.name}[${w.shape.join('x')}]`).join(' ');
  return { 'model parameters': `${layout.total} in ${weights.length} tensors`, 'model tensors': shapes };
}
