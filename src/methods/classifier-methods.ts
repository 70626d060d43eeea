/**
 * The two classifier methods. `local-head` is method B of seed 002: each
 * device owns a share of the labels, reads only their samples, trains its own
 * head over its labels locally, and only the feature extractor is averaged.
 * `partial-fc` (insightface) is the comparison mode: every device keeps the
 * head of its class shard, but the softmax runs over all classes of the
 * global batch through the compute communicator.
 */
import { ClassifierHead } from '../classifier/classifier-head.js';
import { LabelPartition } from '../classifier/label-partition.js';
import { classifierResult } from '../classifier/classifier-result.js';
import { gatherHeads } from '../classifier/gather-heads.js';
import {
  partialFcStagingFloats,
  partialFcStep,
  partialFcStepAsync,
  type PartialFcContext,
  type PartialFcResult,
} from '../classifier/partial-fc.js';
import { getEngine } from '../engine/engine-registry.js';
import { classificationLoss } from '../model/resolve-model.js';
import { resolveClassifierOptions } from './classifier-options.js';
import { CLASSIFIER_OPTIONS } from './method-options.js';
import { createGlobalBatchLoader, createLocalLabelLoader } from './method-loaders.js';
import type { DeviceMethod, DeviceMethodContext, StepLoss, TrainingMethod } from './training-method.js';

type ClassifierMethodParts = Pick<
  TrainingMethod,
  'options' | 'resolveOptions' | 'defaultHeldOut' | 'localState' | 'exportDevice' | 'summarize'
>;

function classifierMethod(name: string): ClassifierMethodParts {
  return {
    options: CLASSIFIER_OPTIONS,
    resolveOptions: (config, ctx) => resolveClassifierOptions(config, ctx, name),
    defaultHeldOut: size => Math.floor(size / 10),
    localState: true,
    exportDevice: cfg => ({ device: cfg.classifier!.exportDevice, always: true }),
    async summarize({ cfg, layout, carried, finished, artifacts }) {
      return { classifier: await classifierResult(cfg, layout, carried, finished, artifacts) };
    },
  };
}

/** A device's head over the labels it owns, and the parts every classifier device shares. */
function headDevice(
  ctx: DeviceMethodContext,
  loss: (head: ClassifierHead, partition: LabelPartition) => DeviceMethod['loss'],
  joinsBackward: boolean,
): DeviceMethod {
  const { tf, cfg, device } = ctx;
  const c = cfg.classifier!;
  const partition = LabelPartition.fromShares(cfg.classes, c.partition);
  const head = new ClassifierHead(
    tf,
    {
      kind: c.head,
      embedding: c.embedding,
      labels: partition.labels[device],
      totalClasses: cfg.classes,
      scale: c.scale,
      margin: c.margin,
      seed: cfg.seed,
    },
    cfg.optimizer,
    ctx.arithmetic,
    synchronousReads(cfg),
  );
  return {
    localVariables: joinsBackward ? head.vars : [],
    loss: loss(head, partition),
    applyLocal: (gradients, step) => head.update(gradients, step),
    snapshot: () => head.snapshot(),
    restore: state => head.restore(state),
    finalValues: () => ({ ...head.values(), labels: head.config.labels }),
    worldHeads: () => {
      if (cfg.topology.processes === 1 || !ctx.collective) return undefined;
      const mine = { ...head.values(), labels: head.config.labels };
      const maxLabels = Math.max(...partition.labels.map(l => l.length));
      return gatherHeads(ctx.collective, mine, cfg.devices, {
        embedding: c.embedding,
        maxLabels,
        bias: mine.b !== undefined,
      });
    },
  };
}

/** Whether the run's engine reads synchronously (else every read is awaited: webgpu). */
function synchronousReads(cfg: DeviceMethodContext['cfg']): boolean {
  return getEngine(cfg.backend).capabilities.synchronousReads;
}

/**
 * Staging of local-head's compute communicator (used only to gather the heads across hosts): chunks, any head size
 * fits.
 */
const HEAD_GATHER_STAGING_FLOATS = 1 << 16;

export const LOCAL_HEAD: TrainingMethod = {
  name: 'local-head',
  description:
    'method B: each device owns a share of the labels and trains its own head locally; only the feature extractor ' +
    'is averaged',
  ...classifierMethod('local-head'),
  createLoader: createLocalLabelLoader,
  // One process needs none; across hosts the heads reach host 0 through it after training.
  computeCommunicator: cfg => (cfg.topology.processes > 1 ? { stagingFloats: HEAD_GATHER_STAGING_FLOATS } : undefined),
  createDevice: ctx =>
    headDevice(
      ctx,
      head =>
        (out, ys): StepLoss => {
          const { loss, correct: c } = classificationLoss(
            ctx.tf,
            head.logits(out, ys),
            ys,
            head.config.labels.length,
            false,
          );
          if (!synchronousReads(ctx.cfg)) {
            // read after the forward's scope, which would dispose it
            const kept = ctx.tf.keep(c);
            return {
              loss,
              correct: (kept.data() as Promise<Float32Array>).then(v => v[0]).finally(() => kept.dispose()),
            };
          }
          const correct = c.dataSync()[0];
          c.dispose();
          return { loss, correct };
        },
      true,
    ),
};

export const PARTIAL_FC: TrainingMethod = {
  name: 'partial-fc',
  description: 'Partial FC: class-sharded heads, softmax over all classes through all-reduced maxima and sums',
  ...classifierMethod('partial-fc'),
  createLoader: createGlobalBatchLoader,
  computeCommunicator: cfg => ({ stagingFloats: partialFcStagingFloats(cfg.batch, cfg.classifier!.embedding) }),
  createDevice: ctx =>
    headDevice(
      ctx,
      (head, partition) =>
        (out, _ys, labels, step): StepLoss | Promise<StepLoss> => {
          const { cfg, device, tf } = ctx;
          const collective = ctx.collective!;
          // Every device's labels, in rank order: the global batch's (exact in float32 below 2^24 classes).
          const gathered = new Float32Array(cfg.batch);
          collective.allGather(Float32Array.from(labels), gathered);
          const c = cfg.classifier!;
          const pfc: PartialFcContext = {
            tf,
            collective,
            device,
            devices: cfg.devices,
            perDevice: cfg.perDevice,
            embedding: c.embedding,
            globalLabels: Int32Array.from(gathered),
            owner: partition.owner,
            localIndex: partition.localIndex,
            localClasses: partition.size(device),
            sampleRate: c.sampleRate,
            seed: cfg.seed,
            step,
            w: head.vars[0],
            b: head.vars[1],
          };
          const asStepLoss = (r: PartialFcResult): StepLoss => ({
            loss: r.surrogate,
            correct: r.correct,
            reportedLoss: r.loss,
            localGradients: r.headGrads,
          });
          // Without synchronous reads the host statistics are awaited (the tape keeps recording meanwhile).
          return synchronousReads(cfg)
            ? asStepLoss(partialFcStep(pfc, out))
            : partialFcStepAsync(pfc, out).then(asStepLoss);
        },
      false,
    ),
};
