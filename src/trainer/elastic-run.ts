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
import { builtModelFlags } from './model-flags.js';
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { StrategySpec } from '../pipeline/strategy.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { serveRendezvous, storeUrl } from '../world/rendezvous.js';
import { generationPrefix, openPresence, presenceKey, regroup, type Verdict } from '../world/regroup.js';
import { askToJoin, JoinWatch, startedBefore } from '../world/join-requests.js';
import type { Elastic } from '../world/elastic-config.js';
import { peerWaitMs } from '../world/peer-wait.js';
import { hostFlags, type HostFlags } from '../world/host-flags.js';
import { describeProcess } from '../world/topology.js';
import type { Checkpoint } from '../checkpoint/checkpoint-file.js';
import { checkpointDirOf, runFingerprint } from './run-checkpoints.js';
import { CheckpointStore } from '../checkpoint/checkpoint-store.js';
import type { CompletedState } from './completed-state.js';
import { TrainingRun, type Regrouping } from './training-run.js';
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

/** How long a host waits for host 0's store at the start (as a run's setup waits: stall-inspector.ts). */
const SETUP_WAIT_MS = 60_000;

/** Whether a generation's failure is a lost host the survivors may regroup around. */
function lostHost(err: unknown): err is TandemError {
  return err instanceof TandemError && (err.code === 'PEER_LOST' || err.code === 'STALLED');
}

export async function runElastic(x: ElasticRunInputs): Promise<TrainSummary> {
  const { strategy, hooks, auto, stopRequest, elastic } = x;
  if (!elastic || !x.cfg.rendezvous)
    return summaryOf(await new TrainingRun(x.cfg, strategy, hooks, auto, stopRequest, x.served).run());
  const server = x.cfg.topology.process === 0 ? (x.served ?? (await serveRendezvous(x.cfg.rendezvous))) : undefined;
  const maxHosts = x.cfg.topology.processes;
  let ending = 'the run ended';
  // host 0 watches for hosts that ask to join (a host restarted by tandem launch --max-restarts)
  const joins = server
    ? await JoinWatch.open(storeUrl(x.cfg.rendezvous), SETUP_WAIT_MS, flagsOf(x), reason =>
        hooks.onEvent?.({ type: 'warning', step: 0, message: `elastic: not admitted: ${reason}` }),
      )
    : undefined;
  try {
    let generation = await firstGeneration(x, elastic);
    for (;;) {
      const { cfg } = generation;
      const regroupWanted = joins && (() => joins.waiting.length > 0 && cfg.topology.processes < maxHosts);
      const onModelFlags = joins && ((flags: HostFlags) => joins.knowModel(flags));
      const elasticGeneration = { ...generation, regroupWanted, onModelFlags };
      const run = new TrainingRun(cfg, strategy, hooks, auto, stopRequest, server, elasticGeneration);
      // host 0 learns at once that this host's process died (world/regroup.ts)
      const presence =
        cfg.rendezvous && cfg.topology.process !== 0
          ? openPresence(cfg.rendezvous, generation.number, cfg.topology.process, cfg.stallTimeoutMs)
          : Promise.resolve(undefined);
      try {
        const ended = await generationEnd(run, cfg);
        if (ended.kind === 'done') return ended.summary;
        generation = await nextGeneration(x, { elastic, maxHosts, joins, server }, generation, run, ended.cause);
      } finally {
        (await presence)?.close();
      }
    }
  } catch (err) {
    ending = `the run ended: ${(err as Error).message.slice(0, 300)}`;
    throw err;
  } finally {
    await joins?.close(ending);
    if (!x.served) await server?.close();
  }
}

/** A non-elastic run's summary (it never regroups). */
function summaryOf(result: TrainSummary | Regrouping): TrainSummary {
  if ('kind' in result) throw new Error('a run that is not elastic regrouped');
  return result;
}

/** How a generation ended: the run done, or a regroup (admitting a host; or `cause`: a host lost). */
type GenerationEnd = { kind: 'done'; summary: TrainSummary } | { kind: 'regroup'; cause?: TandemError };

async function generationEnd(run: TrainingRun, cfg: ResolvedConfig): Promise<GenerationEnd> {
  try {
    const result = await run.run();
    return 'kind' in result ? { kind: 'regroup' } : { kind: 'done', summary: result };
  } catch (err) {
    if (!lostHost(err) || !cfg.rendezvous) throw err;
    return { kind: 'regroup', cause: err };
  }
}

/**
 * The run's first generation: the run as started; a host started before (restarted: join-requests.ts), the
 * generation host 0 admits it into, with the state it goes on from.
 */
async function firstGeneration(x: ElasticRunInputs, elastic: Elastic): Promise<Generation> {
  const first: Generation = { cfg: x.cfg, number: 0, minHosts: elastic.minHosts };
  const { rendezvous, topology } = x.cfg;
  const rank = topology.process;
  if (!rendezvous || rank === 0 || !(await startedBefore(rendezvous, rank, SETUP_WAIT_MS))) return first;
  x.hooks.onEvent?.({
    type: 'warning',
    step: 0,
    message: `elastic: host ${rank} was started before in this run (restarted): it asks host 0 to admit it`,
  });
  // its model too (a model path may give another one here): refused at once, not admitted to end the run
  const flags = { ...flagsOf(x), ...(await builtModelFlags(x.cfg)) };
  const { admission, state } = await askToJoin(storeUrl(rendezvous), rank, flags, SETUP_WAIT_MS);
  if (admission.kind === 'ended' || !state) {
    const why = admission.kind === 'ended' ? admission.reason : 'no state';
    throw new TandemError('ABORTED', `host ${rank} (restarted) was not admitted into the elastic run: ${why}`);
  }
  const cfg = withPrefix(await x.resolveFor(admission.hosts, admission.hostRank), admission.generation);
  x.hooks.onEvent?.({
    type: 'warning',
    step: admission.step,
    message:
      `elastic: host ${rank} (restarted) admitted by host 0: going on from step ${admission.step} as host ` +
      `${admission.hostRank} of ${admission.hosts}, ${cfg.devices} device(s)`,
  });
  const resume = { ...state, fingerprint: runFingerprint(cfg) };
  return { cfg, number: admission.generation, resume, minHosts: elastic.minHosts };
}

/** The flags the hosts compare (host-flags.ts), of the run as started: a restarted host's must be host 0's. */
function flagsOf(x: ElasticRunInputs): HostFlags {
  return hostFlags(x.cfg, x.auto !== undefined, x.elastic?.minHosts);
}

function withPrefix(cfg: ResolvedConfig, generation: number): ResolvedConfig {
  return cfg.rendezvous ? { ...cfg, rendezvous: { ...cfg.rendezvous, prefix: generationPrefix(generation) } } : cfg;
}

/** A generation of an elastic run: its config, and the state it goes on from (none: the run's start). */
interface Generation {
  cfg: ResolvedConfig;
  number: number;
  minHosts: number;
  resume?: Checkpoint;
}

/** What every generation of an elastic run shares: --min-hosts, --hosts (the most), host 0's watch for joiners. */
interface ElasticContext {
  elastic: Elastic;
  maxHosts: number;
  joins?: JoinWatch;
  /** Host 0: the store it serves (when it last heard from each host). */
  server?: StoreServer;
}

/**
 * After generation `g` ended to regroup (`cause`: it lost a host; none: a host waits to join): the survivors' verdict,
 * and the next generation (with the hosts admitted); the run's error when it ends.
 */
async function nextGeneration(
  x: ElasticRunInputs,
  c: ElasticContext,
  g: Generation,
  run: TrainingRun,
  cause: TandemError | undefined,
): Promise<Generation> {
  const { cfg } = g;
  const newest = run.completedState();
  // the step before, when the pre-update copy holds it: what this host rolls back to if a peer did not complete newest
  const before = newest && newest.step > 0 ? run.completedState(newest.step - 1) : undefined;
  const code = cause?.code ?? 'PEER_LOST';
  const ends = (why: string, e: unknown) =>
    new TandemError(code, `${cause ? `${cause.message}; ` : ''}the elastic run ends: ${why}`, undefined, { cause: e });
  const verdict = await regroup({
    store: storeUrl(cfg.rendezvous!),
    topology: cfg.topology,
    generation: g.number,
    step: newest?.step,
    oldest: before?.step ?? newest?.step,
    minHosts: c.elastic.minHosts,
    maxHosts: c.maxHosts,
    joining: c.joins?.waiting,
    lastHeard: c.server && (h => c.server!.lastHeard(presenceKey(g.number, h))),
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
    throw ends(`${endReason(verdict, cfg)}${saved}`, cause);
  }
  const hosts = verdict.hosts.length + verdict.joined.length;
  const number = g.number + 1;
  const nextCfg = withPrefix(await x.resolveFor(hosts, hostRank), number);
  const { weights, params, optimizerState } = state;
  const resume = { step: verdict.step, weights, fingerprint: runFingerprint(nextCfg), params, optimizerState };
  await c.joins?.admit(number, resume, admissions(verdict, number));
  x.hooks.onEvent?.({ type: 'warning', step: verdict.step, message: goingOn(verdict, cause, nextCfg.devices) });
  return { cfg: nextCfg, number, resume, minHosts: c.elastic.minHosts };
}

/** Host 0's answer to each host the verdict admits: its place in generation `generation`. */
function admissions(verdict: Extract<Verdict, { kind: 'go-on' }>, generation: number) {
  const hosts = verdict.hosts.length + verdict.joined.length;
  return verdict.joined.map((request, k) => ({
    request,
    admission: { kind: 'admitted' as const, generation, hosts, hostRank: verdict.hosts.length + k, step: verdict.step },
  }));
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

function goingOn(
  verdict: Extract<Verdict, { kind: 'go-on' }>,
  cause: TandemError | undefined,
  devices: number,
): string {
  const why = cause ? `${cause.code} (${cause.message.slice(0, 300)})` : 'a host asks to join';
  const joined = verdict.joined.map(j => `host ${j.rank} (restarted)`);
  const admitted = joined.length > 0 ? ` and ${joined.join(', ')} admitted` : '';
  return (
    `elastic: ${why}; going on from step ${verdict.step} with ${verdict.hosts.length + verdict.joined.length} ` +
    `host(s) (the previous generation's ${verdict.hosts.join(', ')}${admitted}), ${devices} device(s)`
  );
}
