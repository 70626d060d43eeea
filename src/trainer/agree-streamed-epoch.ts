/**
 * Several hosts on a streamed data module (a `tf.data.Dataset`, tfdata-source.ts): the epoch every host trains,
 * agreed before step 1. Each host counted its dataset's batches while preparing (one pass before training); the hosts
 * gather those counts once over host 0's rendezvous store, and every host trains each epoch up to where the shortest
 * host's dataset ends (PyTorch's "uneven inputs", solved by agreement instead of a hang): a longer host's stream starts
 * again cut to that epoch, its config's steps follow, and host 0 warns naming the short host and both lengths. Even
 * datasets cost the one gather before step 1 and nothing per step.
 */
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { addressTowards, serveRendezvous } from '../world/rendezvous.js';
import { stepsPerEpochOf } from '../data/sampler.js';
import { resolveLrSchedule } from '../optim/lr-schedule.js';
import { cutStreamedEpoch, streamedEpoch } from '../data/tfdata-source.js';
import { hostGather } from './host-gather.js';

/** What the agreement leaves: the run's config (steps of the agreed epoch), the store host 0 serves, a warning. */
export interface AgreedEpoch {
  cfg: ResolvedConfig;
  served?: StoreServer;
  warning?: string;
}

/**
 * The agreed epoch of `cfg`'s streamed data across its hosts (see the file's comment). `config`: the run's config as
 * given (epochs, lr schedule); `served`: the store host 0 already serves, if any (else host 0 serves it from here, for
 * the run).
 */
export async function agreeOnStreamedEpoch(
  cfg: ResolvedConfig,
  config: TrainConfig,
  served?: StoreServer,
): Promise<AgreedEpoch> {
  const own = streamedEpoch(cfg.data);
  const { rendezvous, topology } = cfg;
  if (!own || !rendezvous || topology.processes < 2) return { cfg, served };
  const server = topology.process === 0 && !served ? await serveRendezvous(rendezvous) : served;
  try {
    const waitMs = Math.max(cfg.stallTimeoutMs, 60_000);
    await addressTowards(rendezvous, waitMs); // host 0 listens
    const all = await hostGather(cfg, 'data', waitMs)!.gather('epoch', own);
    const agreed = agreedEpoch(all);
    if (all.every(sizes => same(sizes, agreed))) return { cfg, served: server };
    if (!same(own, agreed)) await cutStreamedEpoch(cfg.data, agreed);
    const warning = topology.process === 0 ? unevenWarning(all, agreed.length) : undefined;
    return { cfg: withEpoch(cfg, config, agreed), served: server, ...(warning ? { warning } : {}) };
  } catch (err) {
    if (server !== served) await server?.close();
    throw err;
  }
}

/** Every host's batches of an epoch → the epoch all train: as many batches as the shortest, each the smallest size. */
export function agreedEpoch(all: number[][]): number[] {
  const batches = Math.min(...all.map(sizes => sizes.length));
  return Array.from({ length: batches }, (_, b) => Math.min(...all.map(sizes => sizes[b])));
}

/** `data: host 1's dataset ends after 5 batches an epoch (36 samples), host 0's after 6 (44): …`. */
export function unevenWarning(all: number[][], batches: number): string {
  const short = all.findIndex(sizes => sizes.length === batches);
  const samples = (sizes: number[]) => sizes.reduce((a, b) => a + b, 0);
  const words = (h: number) => `host ${h}'s after ${all[h].length} (${samples(all[h])} samples)`;
  const longer = all.map((_, h) => h).filter(h => all[h].length > batches);
  const others = longer.length ? longer.map(words).join(', ') : 'the other hosts the same batches of other sizes';
  return (
    `data: host ${short}'s dataset ends after ${batches} batches an epoch (${samples(all[short])} samples), ` +
    `${others}: every host ends each epoch after ${batches} batches, and the rest of a longer host's pass is not ` +
    `trained (give every host as many batches to train them all)`
  );
}

/** `cfg` with each epoch `sizes` batches: the dataset's size, the steps (of `config.epochs`) and the lr schedule. */
function withEpoch(cfg: ResolvedConfig, config: TrainConfig, sizes: number[]): ResolvedConfig {
  const size = sizes.reduce((a, b) => a + b, 0);
  const trainSize = size - (cfg.datasetSize - cfg.trainSize);
  const stepsPerEpoch = stepsPerEpochOf(trainSize, cfg.batch, cfg.partialBatch);
  const steps = config.epochs !== undefined ? config.epochs * stepsPerEpoch : cfg.steps;
  const lrSchedule = resolveLrSchedule(config, cfg.optimizer.lr, steps, stepsPerEpoch);
  const { lrSchedule: _old, ...rest } = cfg;
  void _old;
  return { ...rest, datasetSize: size, trainSize, stepsPerEpoch, steps, ...(lrSchedule ? { lrSchedule } : {}) };
}

function same(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}
