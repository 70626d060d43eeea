/**
 * Taking and restoring a run's checkpoint on the main thread: the shared
 * parameters and optimizer state are read from (written to) shared memory
 * directly; the local heads come from (go to) the compute threads.
 */
import path from 'node:path';
import { statSync } from 'node:fs';
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { modelStateSlots, optimizerStateOf, paramSlots, type SharedBuffers } from '../actors/shared-buffers.js';
import type { WeightShape } from '../actors/protocol.js';
import { readFile } from 'node:fs/promises';
import { decodeCheckpoint, latestCheckpoint, type Checkpoint, type CheckpointBytes, type HeadState, type HookCheckpoint } from './checkpoint-file.js';

/** What must match for a checkpoint to continue this run exactly. */
export function runFingerprint(cfg: ResolvedConfig): string {
  return JSON.stringify({
    model: cfg.model, data: cfg.data, method: cfg.method, optimizer: cfg.optimizer, devices: cfg.devices, batch: cfg.batch, seed: cfg.seed,
    ...(cfg.batchNorm === 'local' ? { batchNorm: 'local' } : {}),
    classifier: cfg.classifier && { ...cfg.classifier, exportDevice: undefined, exportClassifier: undefined },
  });
}

function describeWeight(w: WeightShape): string {
  return `${w.name} [${w.shape.join(', ')}]`;
}

/** The settings two fingerprints differ in, each as `path: checkpoint's (this run: …)`, the first 4; or the fields a fingerprint holds when one does not parse. */
function settingsDiffer(saved: string, mine: string): string {
  let a: unknown, b: unknown;
  try {
    a = JSON.parse(saved); b = JSON.parse(mine);
  } catch {
    return 'model, data, method, optimizer, devices, batch, seed or classifier options';
  }
  const out: string[] = [];
  const walk = (x: unknown, y: unknown, at: string): void => {
    if (JSON.stringify(x) === JSON.stringify(y)) return;
    const objects = x !== null && y !== null && typeof x === 'object' && typeof y === 'object' && !Array.isArray(x) && !Array.isArray(y);
    if (!objects) { out.push(`${at} ${JSON.stringify(x) ?? 'none'} (this run: ${JSON.stringify(y) ?? 'none'})`); return; }
    const xo = x as Record<string, unknown>, yo = y as Record<string, unknown>;
    for (const k of new Set([...Object.keys(xo), ...Object.keys(yo)])) walk(xo[k], yo[k], at ? `${at}.${k}` : k);
  };
  walk(a, b, '');
  const shown = out.slice(0, 4).map(d => (d.length > 200 ? `${d.slice(0, 200)}…` : d));
  return `${shown.join(', ')}${out.length > 4 ? ` and ${out.length - 4} more` : ''}`;
}

/** Reads the checkpoint to resume from (`resume` is a checkpoint file or a directory: its latest), checked against this run. */
export async function loadResume(cfg: ResolvedConfig, weights: WeightShape[], state: WeightShape[] = []): Promise<Checkpoint> {
  return checkResume(cfg, await readResumeBytes(cfg), weights, state);
}

/** The bytes of the checkpoint to resume from (`resume` is a checkpoint file or a directory: its latest). */
export async function readResumeBytes(cfg: ResolvedConfig): Promise<CheckpointBytes> {
  const target = cfg.resume!;
  const file = statSync(target, { throwIfNoEntry: false })?.isFile() ? target : await latestCheckpoint(target);
  try {
    return { source: file, bytes: await readFile(file) };
  } catch (err) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} cannot be read: ${(err as Error).message}`, undefined, { cause: err });
  }
}

/** A checkpoint's bytes decoded and checked against this run. */
export function checkResume(cfg: ResolvedConfig, { source: file, bytes }: CheckpointBytes, weights: WeightShape[], state: WeightShape[] = []): Checkpoint {
  const ckpt = decodeCheckpoint(bytes, file);
  if (JSON.stringify(ckpt.weights) !== JSON.stringify(weights)) {
    const i = ckpt.weights.findIndex((w, k) => JSON.stringify(w) !== JSON.stringify(weights[k]));
    const first = i === -1 ? `this run has ${weights.length - ckpt.weights.length} more` : `${describeWeight(ckpt.weights[i])} (this run: ${weights[i] ? describeWeight(weights[i]) : 'none'})`;
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} holds a different model (variables ${ckpt.weights.map(w => w.name).join(', ')}; the first that differs: ${first}); ` +
      'resume with the model it was written by (and, for a classifier method, the same --embedding)');
  }
  if (state.length > 0 && (!ckpt.state || JSON.stringify(ckpt.stateWeights) !== JSON.stringify(state))) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} does not hold this model's non-trainable weights (${state.map(w => w.name).join(', ')}), ` +
      'so resuming would not continue the run exactly (a checkpoint written before tandem kept them, or of another model); start again or resume from a newer checkpoint');
  }
  const mine = runFingerprint(cfg);
  if (ckpt.fingerprint !== mine) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} was written by a run with other settings: ${settingsDiffer(ckpt.fingerprint, mine)}; ` +
      'resume with the same settings (the strategy, link and step count may change)');
  }
  checkHookState(cfg, ckpt, file);
  if (ckpt.step >= cfg.steps) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} is at step ${ckpt.step}, and the run has ${cfg.steps} steps: nothing left to train (steps count from the start of the run)`);
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
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} holds the state of ${describeHook(saved)} (every rank's residuals), and this run has ` +
      `${describeHook(mine)}: resuming would not continue the run; resume with --comm-hook ${saved.name} and the same commHookOptions, or start again`);
  }
  if (saved.ranks.length !== cfg.devices) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} holds the hook state of ${saved.ranks.length} ranks, and this run has ${cfg.devices} devices`);
  }
}

/** A run with a hook resumed from a checkpoint without hook state: what it should be told, else undefined. */
export function hookStartsAfresh(cfg: ResolvedConfig, ckpt: Checkpoint): string | undefined {
  if (!cfg.commHook || ckpt.commHook) return undefined;
  return `the checkpoint of step ${ckpt.step} holds no communication hook state (written without a hook, or before tandem kept it): ` +
    `${describeHook(cfg.commHook)} starts with fresh state (zero residuals${cfg.commHook.name === 'powersgd' ? ', a new Q' : ''})`;
}

/** Shared parameters and non-trainable weights into device 0's slots (the step-0 broadcast copies them to every replica) and every device's optimizer state. */
export function restoreShared(buffers: SharedBuffers, ckpt: Checkpoint): void {
  paramSlots(buffers)[0].set(ckpt.params);
  if (ckpt.state && buffers.stateTotal > 0) modelStateSlots(buffers)[0].set(ckpt.state);
  for (let d = 0; d < buffers.devices; d++) optimizerStateOf(buffers, d).forEach((s, j) => s.set(ckpt.optimizerState[j]));
}

export function takeCheckpoint(cfg: ResolvedConfig, step: number, weights: WeightShape[], buffers: SharedBuffers, heads?: HeadState[],
  modelState?: { weights: WeightShape[]; values: Float32Array }, commHook?: HookCheckpoint): Checkpoint {
  return {
    step, weights, fingerprint: runFingerprint(cfg),
    params: paramSlots(buffers)[0].slice(),
    optimizerState: optimizerStateOf(buffers, 0).map(s => s.slice()),
    heads,
    ...(commHook ? { commHook } : {}),
    ...(modelState && modelState.weights.length > 0 ? { state: modelState.values, stateWeights: modelState.weights } : {}),
  };
}

export function checkpointDirOf(cfg: ResolvedConfig): string | undefined {
  return cfg.checkpointDir ?? (cfg.out ? path.resolve(cfg.out) : undefined);
}
