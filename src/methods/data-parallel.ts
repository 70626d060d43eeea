/**
 * Data-parallel training: every device holds a full replica and trains on
 * its share of the global batch; every gradient is averaged across the world.
 */
import { TandemError } from '../errors.js';
import { isRegressionLoss } from '../config-types.js';
import { getEngine } from '../engine/engine-registry.js';
import { markRead } from '../engine/kernel-trace.js';
import { outputLoss, outputLossOf } from '../model/output-loss.js';
import { targetLoss } from '../model/target-loss.js';
import { metricSums } from '../model/metric-values.js';
import { evaluateHeldOut } from '../classifier/classifier-result.js';
import { CLASSIFIER_OPTION_KEYS } from './classifier-options.js';
import { createGlobalBatchLoader } from './method-loaders.js';
import type { DeviceMethod, TrainingMethod } from './training-method.js';

export const DATA_PARALLEL: TrainingMethod = {
  name: 'data-parallel',
  description: 'a full replica per device, each on its share of the global batch; every gradient averaged',
  resolveOptions(config) {
    for (const k of CLASSIFIER_OPTION_KEYS) {
      if (config[k] !== undefined)
        throw new TandemError(
          'BAD_CONFIG',
          `config.${k}: applies to --method local-head or partial-fc, not data-parallel`,
        );
    }
    return undefined;
  },
  defaultHeldOut: () => 0,
  createLoader: createGlobalBatchLoader,
  computeCommunicator: () => undefined,
  localState: false,
  exportDevice: cfg => ({ device: 0, always: cfg.trainSize < cfg.datasetSize }),
  createDevice({ tf, cfg, model }): DeviceMethod {
    const spec = outputLossOf(model, cfg.classes, cfg.loss);
    const syncReads = getEngine(cfg.backend).capabilities.synchronousReads;
    return {
      localVariables: [],
      loss(out, ys) {
        const { loss, correct: c } = cfg.targetShape
          ? targetLoss(tf, out, ys, spec)
          : outputLoss(tf, out, ys, spec, cfg.classes, cfg.classWeight);
        const sums = cfg.metrics && metricSums(tf, cfg.metrics, ys, out);
        if (!syncReads) {
          // read after the forward's tidy, which would dispose it
          const [kept, keptSums] = [tf.keep(c), sums && tf.keep(sums)];
          return {
            loss,
            correct: (kept.data() as Promise<Float32Array>).then(v => v[0]).finally(() => kept.dispose()),
            metrics:
              keptSums &&
              keptSums
                .data()
                .then(v => Array.from(v))
                .finally(() => keptSums.dispose()),
          };
        }
        markRead('correct', c); // a replayed step (kernel-trace.ts) reads them at the same place
        const correct = c.dataSync()[0];
        if (sums) markRead('metrics', sums);
        const metrics = sums && Array.from(sums.dataSync());
        tf.dispose([c, ...(sums ? [sums] : [])]);
        return { loss, correct, metrics };
      },
      applyLocal() {
        /* no local state */
      },
      snapshot: () => undefined,
      restore() {
        throw new TandemError('BAD_CHECKPOINT', 'a data-parallel device has no local state to restore');
      },
      finalValues: () => undefined,
    };
  },
  async summarize({ cfg, artifacts }) {
    // held-out accuracy: classification only; several hosts: host 0 (which has the exported model) evaluates
    if (cfg.trainSize >= cfg.datasetSize || isRegressionLoss(cfg.loss) || !artifacts) return {};
    const r = await evaluateHeldOut({
      backend: cfg.backend,
      plugins: cfg.plugins,
      extractor: artifacts,
      data: cfg.data,
      from: cfg.trainSize,
      to: cfg.datasetSize,
      classes: cfg.classes,
      embedding: cfg.classes,
      head: 'linear',
      maxSamples: cfg.evalSamples,
    });
    return { heldOut: { samples: r.samples, accuracy: r.classifierAccuracy! } };
  },
};
