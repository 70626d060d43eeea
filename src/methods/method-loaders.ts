/**
 * The data loaders the built-in methods use: one global-batch sampler and
 * pool (data-parallel, partial-fc); for method B one dedicated pool per
 * device, each reading only the samples of the labels it owns, mapped to
 * local indices.
 */
import { isRegressionLoss, type ResolvedConfig } from '../config-types.js';
import { GlobalBatchSampler } from '../data/sampler.js';
import { LocalLabelSampler } from '../data/local-label-sampler.js';
import { ShardLoader, type ShardLoaderOptions } from '../data/shard-loader.js';
import type { InputBuffers } from '../data/input-slots.js';
import { resolveDataset } from '../data/resolve-dataset.js';
import { isStreamed } from '../data/ring-dataset.js';
import { streamedEpoch } from '../data/tfdata-source.js';
import { labelsOf, sampleSize } from '../data/dataset.js';
import { sourcePath } from '../source-path.js';
import { LabelPartition } from '../classifier/label-partition.js';
import { TandemError } from '../errors.js';
import { localRanks } from '../world/topology.js';

/** Every device reads its share of one seeded global batch per step. */
export async function createGlobalBatchLoader(cfg: ResolvedConfig, input: InputBuffers): Promise<ShardLoader> {
  const sampler = new GlobalBatchSampler(
    cfg.trainSize,
    cfg.batch,
    cfg.seed,
    cfg.devices,
    cfg.shuffle,
    cfg.partialBatch,
  );
  return new ShardLoader(cfg.data, input, sampler, cfg.topology.localDevices, {
    threads: await loaderThreads(cfg, cfg.loaderThreads),
    ranks: localRanks(cfg.topology),
    floatTargets: isRegressionLoss(cfg.loss),
    ...(cfg.targetShape ? { targetFloats: sampleSize(cfg.targetShape) } : {}),
    probes: loadProbes(cfg),
  });
}

/** Method B: every device reads only the samples of the labels it owns (BAD_DATA when it owns none). */
export async function createLocalLabelLoader(cfg: ResolvedConfig, input: InputBuffers): Promise<ShardLoader> {
  const partition = LabelPartition.fromShares(cfg.classes, cfg.classifier!.partition);
  const { owned, labelMaps } = ownedSamples(
    partition,
    labelsOf(await resolveDataset(cfg.data), cfg.trainSize, sourcePath(cfg.data.source)),
  );
  owned.forEach((o, d) => {
    if (o.length === 0)
      throw new TandemError(
        'BAD_DATA',
        `device ${d} owns labels with no training samples; use more data or fewer classes per device`,
      );
  });
  const sampler = new LocalLabelSampler(owned, cfg.perDevice, cfg.seed); // indexed by global rank
  return new ShardLoader(cfg.data, input, sampler, cfg.topology.localDevices, {
    threads: await loaderThreads(cfg, Math.min(1, cfg.loaderThreads)), // one pool per device: a thread each at most
    poolPerDevice: true,
    labelMaps,
    ranks: localRanks(cfg.topology),
    probes: loadProbes(cfg),
  });
}

/**
 * A loader's threads: `wanted` (0: the main thread loads), but at least one for a streamed dataset (a tf.data
 * dataset, fitDataset's), whose ring the main thread fills and only a loader thread reads. Every loader takes its
 * count from here.
 */
async function loaderThreads(cfg: ResolvedConfig, wanted: number): Promise<number> {
  if (wanted > 0) return wanted;
  if (streamedEpoch(cfg.data)) return 1; // a module's tf.data dataset, streamed from here (resolving starts it again)
  return isStreamed(await resolveDataset(cfg.data)) ? 1 : 0;
}

/** The loader threads load the run's plugins (and call their step probes) only when the run has some. */
function loadProbes(cfg: ResolvedConfig): ShardLoaderOptions['probes'] {
  return cfg.plugins.length > 0 ? { plugins: cfg.plugins, values: cfg.pluginOptions } : undefined;
}

/** Per device: the training indices whose labels it owns, and its global -> local label map. */
export function ownedSamples(
  partition: LabelPartition,
  labels: Int32Array,
): { owned: Int32Array[]; labelMaps: Int32Array[] } {
  const counts = new Int32Array(partition.devices);
  for (const y of labels) counts[partition.owner[y]]++;
  const owned = Array.from(counts, n => new Int32Array(n));
  const fill = new Int32Array(partition.devices);
  labels.forEach((y, i) => {
    const d = partition.owner[y];
    owned[d][fill[d]++] = i;
  });
  const labelMaps = partition.labels.map((_, d) =>
    Int32Array.from(partition.owner, (o, label) => (o === d ? partition.localIndex[label] : -1)),
  );
  return { owned, labelMaps };
}
