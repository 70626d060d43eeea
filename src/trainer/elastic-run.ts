/**
 * An elastic run (`--min-hosts M`): generations of a TrainingRun. When a generation fails because a host was lost
 * (PEER_LOST, or STALLED: a silent host, a cut link), each survivor rebuilds in memory the state of the last step its
 * replicas completed (completed-state.ts), the survivors agree over host 0's store on who goes on and from which step
 * (world/regroup.ts), and, while at least M hosts remain, the next generation starts: the same config for fewer hosts
 * (so the global batch is re-split over the devices that remain), its keys in the store under a new prefix (new Gloo
 * contexts, a new host channel and monitor), going on from that step's parameters and optimizer state, not from a
 * checkpoint file. Host 0 serves the store for every generation. Below M hosts, or when host 0 is lost, the run ends
 * with an error saying so (docs/guide/elastic.md).
 */
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { StrategySpec } from '../pipeline/strategy.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { serveRendezvous, storeUrl } from '../world/rendezvous.js';
import { generationPrefix, openPresence, regroup, type Verdict } from '../world/regroup.js';
import type { Elastic } from '../world/elastic-config.js';
import { peerWaitMs } from '../world/peer-wait.js';
import { describeProcess } from '../world/topology.js';
import type { Checkpoint } from '../checkpoint/checkpoint-file.js';
import { checkpointDirOf, runFingerprint } from './run-checkpoints.js';
import { CheckpointStore } from '../checkpoint/checkpoint-store.js';
import type { CompletedState } from './completed-state.js';
import { TrainingRun } from './training-run.js';
import type { StopRequest } from './stop-request.js';
import type { TrainHooks, TrainSummary } from './run-types.js';

export interface ElasticRunInputs {
  cfg: ResolvedConfig;
  strategy: StrategySpec;
  hooks: TrainHooks;
  auto?: TrainSummary['auto'];
  stopRequest?: StopRequest;
  served?: StoreServer;
  elastic?: Elastic;
  /** The run's config for `hosts` hosts, this one being `hostRank` (the next generation's). */
  resolveFor: (hosts: number, hostRank: number) => Promise<ResolvedConfig>;
}

/** Whether a generation's failure is a lost host the survivors may regroup around. */
function lostHost(err: unknown): err is TandemError {
  return err instanceof TandemError && (err.code === 'PEER_LOST' || err.code === 'STALLED');
}

export async function runElastic(x: ElasticRunInputs): Promise<TrainSummary> {
  const { strategy, hooks, auto, stopRequest, elastic } = x;
  if (!elastic || !x.cfg.rendezvous) return new TrainingRun(x.cfg, strategy, hooks, auto, stopRequest, x.served).run();
  const server = x.cfg.topology.process === 0 ? (x.served ?? (await serveRendezvous(x.cfg.rendezvous))) : undefined;
  try {
    let generation: Generation = { cfg: x.cfg, number: 0, minHosts: elastic.minHosts };
    for (;;) {
      const { cfg } = generation;
      const run = new TrainingRun(cfg, strategy, hooks, auto, stopRequest, server, generation);
      // host 0 learns at once that this host's process died (world/regroup.ts)
      const presence =
        cfg.rendezvous && cfg.topology.process !== 0
          ? openPresence(cfg.rendezvous, generation.number, cfg.topology.process, cfg.stallTimeoutMs)
          : Promise.resolve(undefined);
      try {
        return await run.run();
      } catch (err) {
        if (!lostHost(err) || !cfg.rendezvous) throw err;
        generation = await nextGeneration(x, elastic, generation, run, err);
      } finally {
        (await presence)?.close();
      }
    }
  } finally {
    if (!x.served) await server?.close();
  }
}

/** A generation of an elastic run: its config, and the state it goes on from (none: the run's start). */
interface Generation {
  cfg: ResolvedConfig;
  number: number;
  minHosts: number;
  resume?: Checkpoint;
}

/**
 * After generation `g` lost a host (`err`): the survivors' verdict, and the next generation; the run's error when it
 * ends.
 */
async function nextGeneration(
  x: ElasticRunInputs,
  elastic: Elastic,
  g: Generation,
  run: TrainingRun,
  err: TandemError,
): Promise<Generation> {
  const { cfg } = g;
  const newest = run.completedState();
  // the step before, when the pre-update copy holds it: what this host rolls back to if a peer did not complete newest
  const before = newest && newest.step > 0 ? run.completedState(newest.step - 1) : undefined;
  const ends = (why: string, cause: unknown) =>
    new TandemError(err.code, `${err.message}; the elastic run ends: ` + `${why}`, undefined, { cause });
  const verdict = await regroup({
    store: storeUrl(cfg.rendezvous!),
    topology: cfg.topology,
    generation: g.number,
    step: newest?.step,
    oldest: before?.step ?? newest?.step,
    minHosts: elastic.minHosts,
    waitMs: peerWaitMs(cfg.stallTimeoutMs),
    // host 0 may notice the loss a peer wait later (a Gloo timeout), then wait a peer wait for the survivors
    verdictWaitMs: 2 * peerWaitMs(cfg.stallTimeoutMs) + cfg.stallTimeoutMs,
  }).catch((e: unknown) => {
    throw ends((e as Error).message, e);
  });
  const state = verdict.kind === 'go-on' && verdict.step === before?.step ? before : newest;
  const hostRank = verdict.hosts.indexOf(cfg.topology.process);
  if (verdict.kind === 'end' || hostRank < 0 || !state) {
    const saved = cfg.topology.process === 0 ? await savedState(cfg, state, x.hooks) : '';
    throw ends(`${endReason(verdict, cfg)}${saved}`, err);
  }
  const next = await x.resolveFor(verdict.hosts.length, hostRank);
  const number = g.number + 1;
  const nextCfg = next.rendezvous
    ? { ...next, rendezvous: { ...next.rendezvous, prefix: generationPrefix(number) } }
    : next;
  const { weights, params, optimizerState } = state;
  const resume = { step: verdict.step, weights, fingerprint: runFingerprint(nextCfg), params, optimizerState };
  x.hooks.onEvent?.({ type: 'warning', step: verdict.step, message: goingOn(verdict, err, nextCfg.devices) });
  return { cfg: nextCfg, number, resume, minHosts: elastic.minHosts };
}

/**
 * Host 0 of a run that ends below --min-hosts, with a checkpoint directory: its last completed step written as a
 * checkpoint (what a restart resumes from); says what was done, for the error.
 */
async function savedState(cfg: ResolvedConfig, state: CompletedState | undefined, hooks: TrainHooks): Promise<string> {
  const dir = checkpointDirOf(cfg);
  if (!dir || !state) return '';
  const store = new CheckpointStore(dir, cfg.keepCheckpoints);
  try {
    const { step, weights, params, optimizerState } = state;
    const path = await store.write({ step, weights, fingerprint: runFingerprint(cfg), params, optimizerState });
    hooks.onEvent?.({ type: 'checkpoint', step, path });
    return `; checkpoint of step ${step}, the last step this host completed: ${path}`;
  } catch (err) {
    return `; writing its checkpoint failed: ${(err as Error).message}`;
  } finally {
    store.close();
  }
}

function endReason(verdict: Verdict, cfg: ResolvedConfig): string {
  if (verdict.kind === 'end') return verdict.reason;
  return (
    `${describeProcess(cfg.topology, cfg.topology.process)} was dropped from the world: it did not tell host 0 ` +
    `the step it completed within the peer wait (twice stallTimeoutMs, ${2 * cfg.stallTimeoutMs} ms), or cannot ` +
    `rebuild it`
  );
}

function goingOn(verdict: Extract<Verdict, { kind: 'go-on' }>, err: TandemError, devices: number): string {
  return (
    `elastic: ${err.code} (${err.message.slice(0, 300)}); going on from step ${verdict.step} with ` +
    `${verdict.hosts.length} host(s) (the previous generation's ${verdict.hosts.join(', ')}), ${devices} device(s)`
  );
}
