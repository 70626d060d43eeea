/**
 * A device's share of a global batch: its samples, and the weight of its mean loss. A batch that divides evenly gives
 * every device `batch / devices` samples and weight 1; with `partialBatch`, a batch of r samples that does not (an
 * epoch's partial last batch, or every batch when `batch` is no multiple of the devices) gives device d
 * its n_d of them (sampler.ts's shardRange: perhaps none) and weight devices · n_d / r on its mean loss (backward-pass
 * .ts), so that every sample's gradient is scaled by devices / r on every device and the exchange's mean is the sum of
 * the per-sample gradients over r: one engine's gradient of that batch. A device with no sample still takes part in
 * the exchange, its gradient zero (it runs one placeholder row, weighted 0, so every collective inside its step stays
 * in step).
 */
import type { ResolvedConfig } from '../config-types.js';
import { batchSamplesAt, shardRange } from '../data/sampler.js';

export interface DeviceShare {
  /** Samples of the batch this device trains (0: none). */
  samples: number;
  /** Rows it runs forward and backward: its samples, or one placeholder row when it has none. */
  rows: number;
  /** The factor on its mean loss (1 for a full batch). */
  weight: number;
}

type ShareConfig = Pick<ResolvedConfig, 'trainSize' | 'batch' | 'devices' | 'perDevice' | 'partialBatch'>;

/** Device `rank`'s share of global batch `step`. */
export function deviceShare(cfg: ShareConfig, step: number, rank: number): DeviceShare {
  if (!cfg.partialBatch) return { samples: cfg.perDevice, rows: cfg.perDevice, weight: 1 };
  const r = batchSamplesAt(cfg.trainSize, cfg.batch, true, step);
  const [, n] = shardRange(r, cfg.devices, rank);
  return { samples: n, rows: Math.max(1, n), weight: n * cfg.devices === r ? 1 : (cfg.devices * n) / r };
}
