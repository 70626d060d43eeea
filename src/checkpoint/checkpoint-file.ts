/**
 * Checkpoints: everything a run needs to continue exactly — step, parameters,
 * optimizer state, every device's local head (method B / partial-fc), every
 * rank's communication hook state (optional fields: older files still read) — packed
 * with msgpackr and written atomically (temporary file, flush, rename) with a
 * SHA-256 of the payload. Data-loader positions and sampling streams are pure
 * functions of (seed, step), so the step restores them.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { Packr } from 'msgpackr';
import { TandemError } from '../errors.js';
import { writeFileAtomically } from '../output/atomic-write.js';
import { makeDirectory } from '../output/make-directory.js';

const packr = new Packr({ structuredClone: true });
const MAGIC = 'tandem-checkpoint';
const VERSION = 1;
const NAME = /^checkpoint-(\d{9})\.tandem$/;
/** Between a checkpoint's name and the tag of its temporary file. */
export const TMP_INFIX = '.tmp-';

export interface HeadState { w: Float32Array; b?: Float32Array; state: Float32Array[][] }

/** The run's communication hook (name, options) and every rank's state of it: ranks[rank][group] = the hook's state arrays. */
export interface HookCheckpoint { name: string; options: object; ranks: Float32Array[][][] }

export interface Checkpoint {
  step: number;
  /** Variable names and shapes of the shared layout (model order), to refuse a checkpoint of another model. */
  weights: { name: string; shape: number[] }[];
  /** The shared parameters, one slot (all replicas are identical). */
  params: Float32Array;
  /** The optimizer state of the shared parameters (one slot per state vector). */
  optimizerState: Float32Array[];
  /** Per device, its local head (classifier methods). */
  heads?: HeadState[];
  /** The model's non-trainable weights (model order, one flat array) and their names and shapes. */
  state?: Float32Array;
  stateWeights?: { name: string; shape: number[] }[];
  /** With a communication hook: which, and every rank's state of it (error-feedback residuals, PowerSGD's Q). */
  commHook?: HookCheckpoint;
  /** The run's identity: model, method, optimizer, devices, batch, seed. */
  fingerprint: string;
}

/** A checkpoint file's bytes and where they were read (`source`: a file, or host 0's file sent over the network). */
export interface CheckpointBytes { source: string; bytes: Uint8Array }

export function checkpointPath(dir: string, step: number): string {
  return path.join(dir, `checkpoint-${String(step).padStart(9, '0')}.tandem`);
}

/**
 * Writes `checkpoint` into `dir` atomically; a crash mid-write leaves every earlier checkpoint intact. The temporary
 * file is `<checkpoint>.tmp-<tag>` (`tag`: `<pid>-<writer>-<n>`, unique per write: see checkpoint-store.ts); a failed
 * write removes it and fails with WRITE_FAILED naming the checkpoint and the reason.
 */
export async function writeCheckpoint(dir: string, checkpoint: Checkpoint, tag = `${process.pid}-${randomBytes(4).toString('hex')}-0`): Promise<string> {
  await makeDirectory(dir, `checkpoint directory ${dir}`);
  const payload = packr.pack(checkpoint);
  const sha256 = createHash('sha256').update(payload).digest('hex');
  const file = checkpointPath(dir, checkpoint.step);
  return writeFileAtomically(file, packr.pack({ magic: MAGIC, version: VERSION, sha256, payload }), { sync: true, temporary: `${file}${TMP_INFIX}${tag}` });
}

export async function readCheckpoint(file: string): Promise<Checkpoint> {
  return decodeCheckpoint(await readFile(file), file);
}

/** A checkpoint file's bytes (`file` names where they came from in errors), checked as readCheckpoint does. */
export function decodeCheckpoint(bytes: Uint8Array, file: string): Checkpoint {
  let outer: { magic?: string; version?: number; sha256?: string; payload?: Uint8Array };
  try {
    outer = packr.unpack(bytes) as typeof outer;
  } catch (err) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} cannot be read (${(err as Error).message}): it is truncated or not a tandem checkpoint`);
  }
  if (!outer || outer.magic !== MAGIC || !outer.payload || typeof outer.sha256 !== 'string') {
    throw new TandemError('BAD_CHECKPOINT', `${file} is not a tandem checkpoint (or it is truncated)`);
  }
  if (outer.version !== VERSION) throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} has format version ${outer.version}; this tandem reads version ${VERSION}`);
  const sha256 = createHash('sha256').update(outer.payload).digest('hex');
  if (sha256 !== outer.sha256) {
    throw new TandemError('BAD_CHECKPOINT', `checkpoint ${file} is corrupt: its checksum does not match its contents (altered or partly written); ` +
      'resume from an earlier checkpoint');
  }
  return packr.unpack(outer.payload) as Checkpoint;
}

/** The steps of the complete checkpoints in `dir`, newest first. */
export async function checkpointSteps(dir: string): Promise<number[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return stepsOf(names);
}

function stepsOf(names: string[]): number[] {
  return names.map(n => NAME.exec(n)).filter((m): m is RegExpExecArray => m !== null).map(m => Number(m[1])).sort((a, b) => b - a);
}

/** The latest complete checkpoint in `dir` (temporary files of an interrupted write are ignored). */
export async function latestCheckpoint(dir: string): Promise<string> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    throw new TandemError('BAD_CHECKPOINT', `--resume ${dir}: no such directory`);
  }
  const steps = stepsOf(names);
  if (steps.length === 0) throw new TandemError('BAD_CHECKPOINT', `--resume ${dir}: no checkpoint-*.tandem file in it`);
  return checkpointPath(dir, steps[0]);
}

