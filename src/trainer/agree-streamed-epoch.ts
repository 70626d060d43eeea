/**
 * Several hosts on a streamed data module (a `tf.data.Dataset`, tfdata-source.ts): the epoch every host trains,
 * agreed before step 1. Each host counted its dataset's batches while preparing (one pass before training); the hosts
 * gather those counts once over host 0's rendezvous store, and every host trains each epoch up to where the shortest
 * host's dataset ends (PyTorch's "uneven inputs", solved by agreement instead of a hang): a longer host's stream starts
 * again cut to that epoch, its config's steps follow, and host 0 warns naming the short host and both lengths. Hosts
 * that stream their shares of each global batch learn the global batches from everyone's shares. Even datasets cost
 * the one gather before step 1 and nothing per step.
 */
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { addressTowards, serveRendezvous } from '../world/rendezvous.js';
import { stepsPerEpochOf } from '../data/sampler.js';
import { resolveLrSchedule } from '../optim/lr-schedule.js';
import { cutStreamedEpoch, streamedEpoch, type StreamedEpoch } from '../data/tfdata-source.js';
import { hostGather } from './host-gather.js';
import { agreedEpoch, unevenWarning } from './agreed-epoch.js';

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
    const all = await hostGather(cfg, 'data', waitMs)!.gather<StreamedEpoch>('epoch', own);
    refuseMixedShares(all);
    const sizes = all.map(e => e.sizes);
    const agreed = agreedEpoch(sizes, own.shares);
    const mine = agreed.sizes[topology.process];
    const uneven = sizes.some((s, h) => !same(s, agreed.sizes[h]));
    const warning = topology.process === 0 && uneven ? unevenWarning(sizes, mine.length) : undefined;
    // every host starts again when any is cut: each new pass of a seeded dataset.shuffle reshuffles, so the hosts'
    // passes stay in step (and a resumed run makes the same passes)
    const changed = uneven || !same(agreed.globalSizes, own.globalSizes);
    if (changed) await cutStreamedEpoch(cfg.data, mine, agreed.globalSizes);
    const agreedCfg = changed ? withEpoch(cfg, config, agreed.globalSizes) : cfg;
    return { cfg: agreedCfg, served: server, ...(warning ? { warning } : {}) };
  } catch (err) {
    if (server !== served) await server?.close();
    throw err;
  }
}

/** Every host streams shares, or every host whole batches. */
function refuseMixedShares(all: StreamedEpoch[]): void {
  const other = all.findIndex(e => e.shares !== all[0].shares);
  if (other < 0) return;
  const words = (e: StreamedEpoch) =>
    e.shares ? `its share of each global batch (${e.sizes[0]} samples)` : `whole global batches (${e.sizes[0]})`;
  throw new TandemError(
    'BAD_DATA',
    `data module: host 0's dataset gives ${words(all[0])}, host ${other}'s ${words(all[other])}; give every host ` +
      'batches of --batch / hosts (its share) or every host batches of --batch',
  );
}

/** `cfg` with each epoch of `sizes` global batches: the dataset's size, the steps (of `config.epochs`) and the lr. */
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
