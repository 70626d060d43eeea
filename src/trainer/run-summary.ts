/**
 * The last phase of a run: the summary (timings, history, final weights, the
 * method's part), and what `out` and `trace` ask to be written: model files,
 * summary.json, the Chrome trace, the timeline picture (each written
 * atomically; their places were prepared before any thread started).
 */
import path from 'node:path';
import { replicaChecksum } from './replica-checksum.js';
import type { ResolvedConfig } from '../config-types.js';
import type { FinishedReport, ModelArtifactsData, WeightShape } from '../actors/protocol.js';
import type { ParameterGroup, ParameterLayout } from '../model/parameter-layout.js';
import type { TrainingMethod } from '../methods/training-method.js';
import { timelineSvg } from '../monitor/timeline-picture.js';
import { writeChromeTrace } from '../monitor/chrome-trace.js';
import { writeModelFiles } from '../actors/model-files.js';
import { writeFileAtomically } from '../output/atomic-write.js';
import { makeDirectory } from '../output/make-directory.js';
import { OUT_FILES } from '../output/output-places.js';
import type { RunLedger } from './run-ledger.js';
import type { TrainHooks, TrainSummary } from './run-types.js';
import type { EngineDevice } from '../engine/engine.js';

/**
 * Untimed first steps of a run of `steps` steps (engine warm-up, JIT): the steady-state figures
 * (`steadyStepMs`: the wall time of the later steps over their count) leave them out.
 */
export function warmupSteps(steps: number): number {
  return Math.min(3, Math.floor(steps / 5));
}

/** What the step loop measured. */
export interface StepLoopResult {
  lastStep: number;
  stoppedAt?: number;
  /** An elastic run: the generation ended after this step to admit a host (trainer/elastic-run.ts). */
  regroupAfter?: number;
  history: TrainSummary['history'];
  computeTotal: number;
  loadWaitTotal: number;
  steadyCompute: number;
  stepStarts: number[];
  /** When the last step's metrics were recorded (its stepMs is the time since the one before). */
  lastRecordedAt?: number;
  warmup: number;
  trainStart: number;
  /** Steps every device of this process ran as its recorded kernels (actors/step-replay.ts). */
  replayedSteps: number;
}

export interface SummaryInputs {
  cfg: ResolvedConfig;
  method: TrainingMethod;
  layout: ParameterLayout;
  weights: WeightShape[];
  groups: ParameterGroup[];
  /** One replica's parameters (all are identical). */
  replica: Float32Array;
  /** The non-trainable weights' names and shapes (model order). */
  state: WeightShape[];
  firstStep: number;
  loop: StepLoopResult;
  finished: FinishedReport[];
  ledger: RunLedger;
  auto?: TrainSummary['auto'];
  wallSeconds: number;
  hooks: TrainHooks;
  /** Per local device, the accelerator its engine opened (webgpu); absent on the CPU engines. */
  engineDevices?: EngineDevice[];
  /** With epoch logs: each epoch's logs, and where early stopping ended the run. */
  epochs?: Pick<TrainSummary, 'epochs' | 'earlyStop' | 'bestEpochs'>;
}

export async function finishSummary(x: SummaryInputs): Promise<TrainSummary> {
  const { cfg, loop, ledger, layout, firstStep } = x;
  const { lastStep, warmup } = loop;
  const trainEnd = performance.now();
  const trainSeconds = (trainEnd - loop.trainStart) / 1000;
  const ranSteps = lastStep - firstStep + 1;
  const steadySteps = lastStep - warmup;
  const last = loop.history[loop.history.length - 1];
  const exportDevice = x.method.exportDevice(cfg).device;
  const artifacts = x.finished.find(f => f.device === exportDevice)?.artifacts;
  const summary: TrainSummary = {
    config: cfg,
    steps: lastStep,
    firstStep,
    stoppedAt: loop.stoppedAt,
    checkpointPath: ledger.lastCheckpoint,
    finalLoss: last.loss,
    finalAccuracy: last.accuracy,
    samplesPerSecond: (ranSteps * cfg.batch) / trainSeconds,
    wallSeconds: x.wallSeconds,
    meanStepMs: (trainSeconds * 1000) / ranSteps,
    steadyStepMs: (trainEnd - loop.stepStarts[warmup - firstStep + 1]) / steadySteps,
    timings: timingsOf(loop, ledger, ranSteps, steadySteps, trainSeconds * 1000),
    parameters: layout.total,
    replayedSteps: loop.replayedSteps,
    replicaChecksum: replicaChecksum(x.replica),
    wire: wireOf(
      cfg.commHook?.name ?? 'none',
      ledger.commStats.wireFloats / Math.max(1, ranSteps * cfg.topology.localDevices),
    ),
    strategy: { name: cfg.strategy, groups: x.groups.map(g => ({ name: g.name, parameters: g.end - g.start })) },
    auto: x.auto,
    engineDevices: x.engineDevices,
    skippedUpdates: ledger.skipped.map(sk => ({ ...sk, variable: ledger.nonFinite.get(sk.step) })),
    link: cfg.link
      ? { emulated: true, label: cfg.link.label, bitsPerSecond: cfg.link.bandwidth, latencyMs: cfg.link.latencyMs }
      : undefined,
    history: loop.history,
    ...x.epochs,
    weights: modelOrderWeights(x.weights, layout, x.replica),
    nonTrainableWeights: splitState(x.state, x.finished[0].state),
    nonTrainableIdentical: x.finished.every(f => sameBits(f.state, x.finished[0].state)),
  };
  Object.assign(
    summary,
    await x.method.summarize({ cfg, layout, carried: ledger.carried, finished: x.finished, artifacts }),
  );
  await writeRunFiles(cfg, summary, ledger, firstStep, lastStep, artifacts);
  x.hooks.onEvent?.({
    type: 'finished',
    steps: lastStep,
    modelPath: summary.modelPath,
    tracePath: summary.tracePath,
    timelinePath: summary.timelinePath,
  });
  return summary;
}

/**
 * The run's mean times per step: compute (steady and overall), exchange and update per group, waiting for inputs (and
 * that wait's share of the training time).
 */
function timingsOf(loop: StepLoopResult, ledger: RunLedger, ranSteps: number, steadySteps: number, trainMs: number) {
  return {
    steadyComputeMs: loop.steadyCompute / steadySteps,
    meanComputeMs: loop.computeTotal / ranSteps,
    meanExchangeMs: ledger.commStats.exchangeMs / Math.max(1, ledger.commStats.count),
    meanUpdateMs: ledger.commStats.updateMs / Math.max(1, ledger.commStats.count),
    meanLoadWaitMs: loop.loadWaitTotal / ranSteps,
    loadWaitShare: trainMs > 0 ? loop.loadWaitTotal / trainMs : 0,
  };
}

async function writeRunFiles(
  cfg: ResolvedConfig,
  summary: TrainSummary,
  ledger: RunLedger,
  firstStep: number,
  lastStep: number,
  artifacts?: ModelArtifactsData,
): Promise<void> {
  if (cfg.out) await writeOutputs(cfg.out, summary, artifacts);
  if (cfg.out && cfg.classNames)
    // the name of each class, in label order: predictions' argmax indexes it
    await writeFileAtomically(path.join(cfg.out, OUT_FILES.labels), `${JSON.stringify(cfg.classNames, null, 1)}\n`);
  if (cfg.out && summary.classifier?.fullClassifier) {
    summary.classifier.classifierPath = await writeModelFiles(
      path.join(cfg.out, OUT_FILES.classifierDir),
      summary.classifier.fullClassifier,
    );
  }
  if (cfg.trace)
    summary.tracePath = await writeChromeTrace(cfg.trace, ledger.spans, { strategy: cfg.strategy, link: summary.link });
  if (cfg.out) {
    // The picture of the last steps: enough to see the schedule, few enough to read it.
    const recent = ledger.spans.filter(sp => sp.step > lastStep - 3);
    summary.timelinePath = path.join(cfg.out, OUT_FILES.timeline);
    await writeFileAtomically(
      summary.timelinePath,
      timelineSvg(
        recent,
        `tandem: ${cfg.model.source}, ${cfg.devices} devices, ${cfg.strategy}` +
          (`${cfg.link ? `, link ${cfg.link.label} (emulated)` : ''}; steps ` +
            `${Math.max(firstStep, lastStep - 2)}-${lastStep}`),
      ),
    );
    if (!cfg.trace)
      summary.tracePath = await writeChromeTrace(path.join(cfg.out, OUT_FILES.trace), ledger.spans, {
        strategy: cfg.strategy,
        link: summary.link,
      });
  }
}

async function writeOutputs(dir: string, summary: TrainSummary, artifacts?: ModelArtifactsData): Promise<void> {
  await makeDirectory(dir, `--out ${dir}`);
  if (artifacts) summary.modelPath = await writeModelFiles(dir, artifacts);
  const { weights, nonTrainableWeights, ...rest } = summary;
  void weights;
  void nonTrainableWeights;
  if (rest.classifier) rest.classifier = { ...rest.classifier, fullClassifier: undefined };
  await writeFileAtomically(path.join(dir, OUT_FILES.summary), JSON.stringify(rest, null, 2));
}

export function splitState(shapes: WeightShape[], flat: Float32Array): TrainSummary['nonTrainableWeights'] {
  let at = 0;
  return shapes.map(w => {
    const size = w.shape.reduce((a, b) => a * b, 1);
    const values = flat.slice(at, at + size);
    at += size;
    return { name: w.name, shape: w.shape, values };
  });
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

export function modelOrderWeights(
  weights: WeightShape[],
  layout: ParameterLayout,
  slot: Float32Array,
): TrainSummary['weights'] {
  const out: TrainSummary['weights'] = weights.map(w => ({
    name: w.name,
    shape: w.shape,
    values: new Float32Array(0),
  }));
  for (const v of layout.variables) out[v.modelIndex].values = slot.slice(v.offset, v.offset + v.size);
  return out;
}

function wireOf(commHook: string, floatsPerStep: number): TrainSummary['wire'] {
  return { commHook, floatsPerStep, bytesPerStep: 4 * floatsPerStep };
}
