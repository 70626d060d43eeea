/**
 * Taking and restoring a run's checkpoint on the main thread: the shared
 * parameters and optimizer state are read from (written to) shared memory
 * directly; the local heads come from (go to) the compute threads.
 */
import path from 'node:path';
import { createHash } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { modelStateSlots, optimizerStateOf, paramSlots, type SharedBuffers } from '../actors/shared-buffers.js';
import type { WeightShape } from '../actors/protocol.js';
import { scheduleIdentity } from '../optim/lr-schedule.js';
import { mathPartValues } from '../options/option-registry.js';
import { checkAgainstRun } from '../checkpoint/checkpoint-fields.js';
import { sourcePath } from '../source-path.js';
import { readRegularFileSync } from '../read-regular-file.js';
import { MAX_MODEL_JSON_BYTES } from '../model/layers-model-files.js';
import {
  checkpointSteps,
  decodeCheckpoint,
  newestWholeCheckpoint,
  readCheckpointBytes,
  type Checkpoint,
  type CheckpointBytes,
  type HeadState,
  type HookCheckpoint,
} from '../checkpoint/checkpoint-file.js';

/**
 * The data as a checkpoint must match it: an image folder's cache directory is where its bytes are kept, not which
 * samples they are, and may move; its stamp (the files' paths, sizes, times and labels) and a CSV's stay.
 */
function dataIdentity(data: ResolvedConfig['data']): ResolvedConfig['data'] {
  // a data module's host rank and hosts: a checkpoint is every host's, and may resume on other hosts
  const { hostRank, hosts, ...options } = data.options;
  void [hostRank, hosts];
  if (data.file?.kind !== 'image-folder') return { ...data, options };
  const { cacheDir, ...file } = data.file;
  void cacheDir;
  return { ...data, file: { ...file, cacheDir: '' } };
}

/**
 * The model as a checkpoint must match it: a model.json by its topology (a copy elsewhere, or the run moved to
 * another machine, is the same model; another dropout rate or activation in the same file is not), its path
 * otherwise. An unreadable file keeps its path (the model loader reports it).
 */
function modelIdentity(model: ResolvedConfig['model']): unknown {
  if (!model.source.endsWith('.json')) return model;
  type Topology = { class_name?: unknown; config?: unknown; model_config?: Topology };
  let layers: Topology;
  try {
    const json = readRegularFileSync(sourcePath(model.source), MAX_MODEL_JSON_BYTES).toString('utf8');
    const topology = (JSON.parse(json) as { modelTopology: Topology }).modelTopology;
    layers = topology.model_config ?? topology; // keras's converter nests it; keras_version, backend do not count
  } catch {
    return model;
  }
  const what = JSON.stringify({ class_name: layers.class_name, config: layers.config });
  return {
    layersOfModelJson: `sha256:${createHash('sha256').update(what).digest('hex').slice(0, 16)}`,
    options: model.options,
  };
}

/**
 * What must match for a checkpoint to continue this run exactly. `legacy`: a model.json by its path, as checkpoints
 * written before its topology was fingerprinted hold it (they still resume).
 */
export function runFingerprint(cfg: ResolvedConfig, legacy = false): string {
  const partOptions = mathPartValues(cfg.method, cfg.backend, cfg.pluginOptions);
  return JSON.stringify({
    model: legacy ? cfg.model : modelIdentity(cfg.model),
    data: dataIdentity(cfg.data),
    method: cfg.method,
    optimizer: cfg.optimizer,
    // the schedule is a function of the step: the same schedule continues exactly (absent: constant, as before)
    ...(cfg.lrSchedule ? { lrSchedule: scheduleIdentity(cfg.lrSchedule) } : {}),
    devices: cfg.devices,
    batch: cfg.batch,
    ...(cfg.accumulate > 1 ? { accumulate: cfg.accumulate } : {}), // other micro-batches: other rounding, BN statistics
    seed: cfg.seed,
    ...(cfg.batchNorm === 'local' ? { batchNorm: 'local' } : {}),
    ...(cfg.shuffle === false ? { shuffle: false } : {}), // another order of the samples: not the same run
    ...(cfg.precision === 'bf16' ? { precision: 'bf16' } : {}), // other arithmetic: not the same run
    ...(cfg.partialBatch ? { partialBatch: true } : {}), // other batches: not the same run
    classifier: cfg.classifier && { ...cfg.classifier, exportDevice: undefined, exportClassifier: undefined },
    ...(partOptions ? { partOptions } : {}), // a plugin method's or engine's options: its math (absent: as before)
  });
}

/**
 * The first variable where two models differ, e.g. `dense_Dense1/kernel is [64,32] in the checkpoint, [81,32] in this
 * run`.
 */
function modelDifference(saved: WeightShape[], mine: WeightShape[]): string {
  const show = (w: WeightShape | undefined) => (w ? `${w.name} [${w.shape.join(',')}]` : 'none');
  const i = saved.findIndex((w, k) => JSON.stringify(w) !== JSON.stringify(mine[k]));
  const at = i === -1 ? saved.length : i;
  return (
    `${saved.length} variables in the checkpoint, ${mine.length} in this run; variable ${at}: ` +
    `${show(saved[at])} in the checkpoint, ${show(mine[at])} in this run`
  );
}

/**
 * The settings two fingerprints disagree on, each as `field: X in the checkpoint, Y in this run` (nested fields dotted:
 * `optimizer.lr`; an optimizer of another kind, or data of another source, whole); empty when `saved` is not a
 * fingerprint this version can read.
 */
export function fingerprintDifferences(saved: string, mine: string): string[] {
  try {
    return differences(JSON.parse(saved), JSON.parse(mine));
  } catch {
    // Not JSON, or nested past the stack (a crafted checkpoint's fingerprint): the caller names the settings whole.
    return [];
  }
}

function differences(a: unknown, b: unknown): string[] {
  const out: string[] = [];
  const isRecord = (v: unknown): v is Record<string, unknown> =>
    v !== null && typeof v === 'object' && !Array.isArray(v);
  const walk = (x: unknown, y: unknown, at: string): void => {
    // Two records of another kind (an sgd and an adam optimizer, two data sources) differ as a whole.
    const sameKind = isRecord(x) && isRecord(y) && x.kind === y.kind && x.source === y.source;
    if (sameKind) {
      for (const key of new Set([...Object.keys(x), ...Object.keys(y)]))
        walk(x[key], y[key], at ? `${at}.${key}` : key);
    } else if (JSON.stringify(x) !== JSON.stringify(y)) {
      const shown = (text: string) => (text.length > 200 ? `${text.slice(0, 200)}…` : text);
      const show = (v: unknown) => (v === undefined ? 'none' : shown(JSON.stringify(v)));
      out.push(`${at} ${show(x)} in the checkpoint, ${show(y)} in this run`);
    }
  };
  if (!isRecord(a) || !isRecord(b)) return [];
  walk(a, b, '');
  return out;
}

/**
 * Reads the checkpoint to resume from (`resume` is a checkpoint file or a directory: its newest that reads back whole),
 * checked against this run.
 */
export async function loadResume(
  cfg: ResolvedConfig,
  weights: WeightShape[],
  state: WeightShape[] = [],
): Promise<Checkpoint> {
  return checkResume(cfg, await readResumeBytes(cfg), weights, state);
}

/**
 * The bytes of the checkpoint to resume from: `resume` is a checkpoint file (that one, or BAD_CHECKPOINT: never another
 * in its place) or a directory (its newest checkpoint that reads back whole; the newer ones skipped are in `skipped`).
 */
export async function readResumeBytes(cfg: ResolvedConfig): Promise<CheckpointBytes> {
  const target = cfg.resume!;
  if (!statSync(target, { throwIfNoEntry: false })?.isFile()) return newestWholeCheckpoint(target);
  return { source: target, bytes: await readCheckpointBytes(target) };
}

/**
 * What a run resumed from a directory says of the newer checkpoints it skipped (`skipped` of readResumeBytes), else
 * undefined.
 */
export function skippedCheckpointsWarning(
  cfg: ResolvedConfig,
  ckpt: Checkpoint,
  { source, skipped }: CheckpointBytes,
): string | undefined {
  if (!skipped || skipped.length === 0) return undefined;
  return (
    `--resume ${cfg.resume}: skipped ${skipped.length} newer checkpoint(s) that do not read back whole — ` +
    `${skipped.join('; ')}; ` +
    `resuming from ${path.basename(source)} (step ${ckpt.step}), the newest that does`
  );
}

/** A checkpoint's bytes decoded and checked against this run. */
export function checkResume(
  cfg: ResolvedConfig,
  { source: file, bytes }: CheckpointBytes,
  weights: WeightShape[],
  state: WeightShape[] = [],
): Checkpoint {
  const ckpt = decodeCheckpoint(bytes, file);
  if (JSON.stringify(ckpt.weights) !== JSON.stringify(weights)) {
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} holds a different model (${modelDifference(ckpt.weights, weights)}); ` +
        ('resume with the model (and input shape, classes; for a classifier method the same --embedding) it was ' +
          'written by'),
    );
  }
  if (state.length > 0 && (!ckpt.state || JSON.stringify(ckpt.stateWeights) !== JSON.stringify(state))) {
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} does not hold this model's non-trainable weights (${state.map(w => w.name).join(', ')}), ` +
        ('so resuming would not continue the run exactly (a checkpoint written before tandem kept them, or of ' +
          'another model); start again or resume from a newer checkpoint'),
    );
  }
  const mine = runFingerprint(cfg);
  if (ckpt.fingerprint !== mine && ckpt.fingerprint !== runFingerprint(cfg, true)) {
    const differences = fingerprintDifferences(ckpt.fingerprint, mine);
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} was written by a run with other settings` +
        (differences.length > 0
          ? `: ${differences.join('; ')}`
          : ' (model, data, method, optimizer, devices, batch or seed)') +
        '; ' +
        'resume with the same settings (the strategy, link and step count may change)',
    );
  }
  checkHookState(cfg, ckpt, file);
  if (ckpt.step >= cfg.steps) {
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} is at step ${ckpt.step}, and the run has ${cfg.steps} steps: nothing left to train (steps ` +
        `count from the start of the run)`,
    );
  }
  return ckpt;
}

/** How a run's communication hook reads in messages: its name and options. */
export function describeHook(hook: { name: string; options: object } | undefined): string {
  return hook ? `communication hook '${hook.name}' ${JSON.stringify(hook.options)}` : 'no communication hook';
}

/**
 * A checkpoint with hook state continues only the same hook with the same options (its residuals and Q belong to
 * them). A checkpoint without (a run without a hook, or one written before tandem kept hook state) may start a hook:
 * its state starts afresh (the run says so: `hookStartsAfresh`).
 */
function checkHookState(cfg: ResolvedConfig, ckpt: Checkpoint, file: string): void {
  const saved = ckpt.commHook;
  if (!saved) return;
  const mine = cfg.commHook && { name: cfg.commHook.name, options: cfg.commHook.options };
  if (JSON.stringify(mine) !== JSON.stringify({ name: saved.name, options: saved.options })) {
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} holds the state of ${describeHook(saved)} (every rank's residuals), and this run has ` +
        (`${describeHook(mine)}: resuming would not continue the run; resume with --comm-hook ${saved.name} and the ` +
          `same commHookOptions, or start again`),
    );
  }
  if (saved.ranks.length !== cfg.devices) {
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file} holds the hook state of ${saved.ranks.length} ranks, and this run has ${cfg.devices} devices`,
    );
  }
}

/** A run with a hook resumed from a checkpoint without hook state: what it should be told, else undefined. */
export function hookStartsAfresh(cfg: ResolvedConfig, ckpt: Checkpoint): string | undefined {
  if (!cfg.commHook || ckpt.commHook) return undefined;
  return (
    `the checkpoint of step ${ckpt.step} holds no communication hook state (written without a hook, or before ` +
    `tandem kept it): ` +
    (`${describeHook(cfg.commHook)} starts with fresh state (zero ` +
      `residuals${cfg.commHook.name === 'powersgd' ? ', a new Q' : ''})`)
  );
}

/**
 * Shared parameters and non-trainable weights into device 0's slots (the step-0 broadcast copies them to every replica)
 * and every device's optimizer state.
 */
export function restoreShared(buffers: SharedBuffers, ckpt: Checkpoint, file = 'being resumed'): void {
  checkAgainstRun(ckpt, file, {
    params: buffers.total,
    slots: optimizerStateOf(buffers, 0).map(s => s.length),
    state: buffers.stateTotal,
  });
  paramSlots(buffers)[0].set(ckpt.params);
  if (ckpt.state && buffers.stateTotal > 0) modelStateSlots(buffers)[0].set(ckpt.state);
  for (let d = 0; d < buffers.devices; d++)
    optimizerStateOf(buffers, d).forEach((s, j) => s.set(ckpt.optimizerState[j]));
}

export function takeCheckpoint(
  cfg: ResolvedConfig,
  step: number,
  weights: WeightShape[],
  buffers: SharedBuffers,
  heads?: HeadState[],
  modelState?: { weights: WeightShape[]; values: Float32Array },
  commHook?: HookCheckpoint,
): Checkpoint {
  return {
    step,
    weights,
    fingerprint: runFingerprint(cfg),
    params: paramSlots(buffers)[0].slice(),
    optimizerState: optimizerStateOf(buffers, 0).map(s => s.slice()),
    heads,
    ...(commHook ? { commHook } : {}),
    ...(modelState && modelState.weights.length > 0
      ? { state: modelState.values, stateWeights: modelState.weights }
      : {}),
  };
}

export function checkpointDirOf(cfg: ResolvedConfig): string | undefined {
  return cfg.checkpointDir ?? (cfg.out ? path.resolve(cfg.out) : undefined);
}

/**
 * A warning when the checkpoint directory already holds checkpoints this run does not resume from (another run's):
 * this run's checkpoints of the same steps replace them, keep-checkpoints removes older ones, and a later `--resume
 * DIR`
 * takes the newest whichever run wrote it. Undefined when the directory holds none, or the run resumes from it.
 */
export async function earlierRunWarning(cfg: ResolvedConfig, dir: string): Promise<string | undefined> {
  if (cfg.resume !== undefined) {
    const from = path.resolve(
      statSync(cfg.resume, { throwIfNoEntry: false })?.isFile() ? path.dirname(cfg.resume) : cfg.resume,
    );
    // continuing the run whose checkpoints these are (by real path: the run writes under the real path it locked)
    if (realPathOf(from) === realPathOf(dir)) return undefined;
  }
  const steps = await checkpointSteps(dir);
  if (steps.length === 0) return undefined;
  const range = steps.length === 1 ? `step ${steps[0]}` : `steps ${steps[steps.length - 1]}-${steps[0]}`;
  return (
    `${dir} already holds ${steps.length} checkpoint(s) of an earlier run (${range}) and this run does not resume ` +
    `from them: ` +
    (`its checkpoints of the same steps replace them, --keep-checkpoints removes older ones, and a later --resume ` +
      `${dir} takes the newest, `) +
    (`whichever run wrote it. To continue that run, give --resume ${dir}; to keep it, give this run another ` +
      `--checkpoint-dir (or --out)`)
  );
}

function realPathOf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}
