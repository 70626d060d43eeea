/**
 * A device's step replayed (../engine/kernel-trace.ts): the compute thread records its forward and backward on
 * consecutive steps until two recordings agree in every kernel, attribute, source, mark and constant, and from then
 * on runs that recording's kernels on each step's inputs and current variables, without tfjs's layers, engine and
 * tape around them. The marks are where the pass does more than kernels: the forward gate's waits, backward's start,
 * the loss and the correct count read, each gradient handed over. Every `REVERIFY_EVERY` steps a step is recorded
 * again and must still agree, or the device records until two agree again.
 *
 * Replayed only on the native backend, reading synchronously, over a whole batch in one pass (no micro-batches; an
 * uneven share's rows and weight are the recording's, so an epoch's partial last batch runs live), data-parallel,
 * without plugins (whose probes and layers run JavaScript a replay would skip);
 * a recording that read a kernel's output it did not mark, or whose method's loss did more than a loss and counts, is
 * not kept.
 * `TANDEM_STEP_REPLAY=off` keeps every step on tfjs (the bench's and the tests' comparison).
 */
import type { TensorInfo } from '@tensorflow/tfjs-core';
import type { Tf } from '../engine/tfjs-types.js';
import {
  backendRecordable,
  releaseTrace,
  startRecording,
  wrapBackendKernels,
  type KernelTrace,
  type ReadMark,
  type HookMark,
  replayTraceHook,
  type TraceBackend,
  type TraceRecorder,
} from '../engine/kernel-trace.js';
import { ReplayVariables, replayTrace, sameTrace } from '../engine/trace-replay.js';
import type { DestinationMark } from '../engine/gradient-tape.js';
import { offerOutputDestination } from '../engine/output-destination.js';

/** What the pass marks in its recording, besides the kernels. */
export type PassMark =
  | { kind: 'need'; indices: readonly number[]; layer: string }
  | { kind: 'settle' }
  | { kind: 'backwardStarted' }
  | { kind: 'ready'; index: number }
  | ReadMark
  | HookMark
  | DestinationMark;

/** A replayed pass's marks, for the pass to act on. */
export interface ReplayedPass {
  need(indices: readonly number[], layer: string): void;
  settle(): void;
  backwardStarted(): void;
  read(name: string, values: Float32Array | Int32Array): void;
  ready(index: number, gradient: Float32Array): void;
  /** Where variable `index`'s gradient goes, for its kernel to write it there (undefined: anywhere). */
  destination(index: number): Float32Array | undefined;
}

/** Steps between two checks of a kept recording against a fresh one. */
export const REVERIFY_EVERY = 200;
/** Recordings that may disagree (or be refused) before the device stops trying for the run. */
const MAX_MISSES = 8;

type Shapes = string;

export class StepReplay {
  private kept?: { trace: KernelTrace<PassMark>; shapes: Shapes };
  private last?: { trace: KernelTrace<PassMark>; shapes: Shapes };
  private misses = 0;
  private sinceCheck = 0;
  private off: boolean;
  /** The model's variables of the step replayed now, and every variable tfjs knows of, as a replay finds them. */
  private stepVariables: readonly { readonly dataId: object }[] = [];
  private readonly variables = new ReplayVariables(() => [
    ...this.stepVariables,
    ...Object.values(this.tf.engine().registeredVariables),
  ]);

  constructor(
    private readonly tf: Tf,
    private readonly backend: TraceBackend,
    enabled: boolean,
  ) {
    this.off = !enabled || process.env.TANDEM_STEP_REPLAY === 'off';
  }

  /** Steps replayed so far (a bench's and a test's count). */
  replayed = 0;

  /**
   * The recording to replay this step on `inputs` (`weight`: the share's factor on the loss, device-share.ts), or
   * undefined (record it, or run it live).
   */
  replayable(inputs: readonly TensorInfo[], weight: number): KernelTrace<PassMark> | undefined {
    if (this.off || !this.kept || !backendRecordable(this.tf)) return undefined;
    if (this.kept.shapes !== shapesOf(inputs, weight) || ++this.sinceCheck >= REVERIFY_EVERY) return undefined;
    this.replayed++;
    return this.kept.trace;
  }

  /** Runs `trace` on this step's variables and inputs, handing its marks to `pass`. */
  replay(
    trace: KernelTrace<PassMark>,
    variables: readonly { readonly dataId: object }[],
    inputs: readonly TensorInfo[],
    pass: ReplayedPass,
  ): void {
    const floats = (t: TensorInfo) => {
      const values = this.backend.data.get(t.dataId)?.values;
      if (values instanceof Float32Array || values instanceof Int32Array) return values;
      throw new Error(`step replay: no host values for a ${t.dtype} tensor the recording read`);
    };
    try {
      this.stepVariables = variables;
      replayTrace(trace, this.backend, {
        variables: this.variables,
        inputs,
        onMark: (mark, tensors) => onMark(pass, mark, tensors, floats),
      });
    } finally {
      offerOutputDestination(undefined); // a kernel that threw between a destination's marks left it offered
    }
  }

  /** A recorder for this step, or undefined (nothing to gain: the step runs live, unrecorded). */
  record(
    variables: readonly { readonly dataId: object }[],
    inputs: readonly TensorInfo[],
    weight: number,
  ): Recording | undefined {
    if (this.off || !backendRecordable(this.tf)) return undefined;
    const shapes = shapesOf(inputs, weight);
    if (this.kept && this.kept.shapes !== shapes) return undefined; // a partial batch: live
    wrapBackendKernels(this.tf, this.tf.getBackend()); // a kernel registered since
    const watched = Object.values(this.tf.engine().registeredVariables);
    return { recorder: startRecording<PassMark>(this.backend, variables, inputs, watched), shapes };
  }

  /** The recording ended (`usable`: the pass did nothing a replay would miss): kept, compared or dropped. */
  recorded(recording: Recording, usable: boolean): void {
    const result = recording.recorder.finish();
    if ('spoiled' in result || !usable || result.calls.length === 0) {
      if (!('spoiled' in result)) releaseTrace(result, this.backend);
      this.miss();
      return;
    }
    const fresh = { trace: result, shapes: recording.shapes };
    if (this.kept) {
      this.sinceCheck = 0;
      const agrees = this.kept.shapes === fresh.shapes && sameTrace(this.kept.trace, fresh.trace);
      releaseTrace(fresh.trace, this.backend);
      if (agrees) return;
      releaseTrace(this.kept.trace, this.backend);
      this.kept = undefined;
      this.miss();
      return;
    }
    const before = this.last;
    this.last = fresh;
    if (before && before.shapes === fresh.shapes && sameTrace(before.trace, fresh.trace)) {
      this.kept = fresh;
      this.last = undefined;
    } else this.miss();
    if (before) releaseTrace(before.trace, this.backend);
  }

  /** Releases what the device holds (its model is going away). */
  dispose(): void {
    for (const t of [this.kept, this.last]) if (t) releaseTrace(t.trace, this.backend);
    this.kept = this.last = undefined;
  }

  private miss(): void {
    if (++this.misses < MAX_MISSES) return;
    this.off = true;
    this.dispose();
  }
}

export interface Recording {
  recorder: TraceRecorder<PassMark>;
  shapes: Shapes;
}

/** A step's form: its inputs' shapes and its share's weight (a partial batch's share may have a full one's rows). */
function shapesOf(inputs: readonly TensorInfo[], weight: number): Shapes {
  return `${inputs.map(t => `${t.dtype}[${t.shape.join(',')}]`).join(' ')} weight ${weight}`;
}

function onMark(
  pass: ReplayedPass,
  mark: PassMark,
  tensors: TensorInfo[],
  floats: (t: TensorInfo) => Float32Array | Int32Array,
): void {
  switch (mark.kind) {
    case 'need':
      return pass.need(mark.indices, mark.layer);
    case 'settle':
      return pass.settle();
    case 'backwardStarted':
      return pass.backwardStarted();
    case 'read':
      return pass.read(mark.name, floats(tensors[0]));
    case 'hook':
      return replayTraceHook(mark.id, tensors);
    case 'destination':
      return offerOutputDestination(pass.destination(mark.index));
    case 'destinationEnd':
      return offerOutputDestination(undefined);
    case 'ready': {
      const gradient = floats(tensors[0]);
      if (!(gradient instanceof Float32Array)) throw new Error('step replay: a gradient of integers');
      return pass.ready(mark.index, gradient);
    }
    default:
      return mark satisfies never;
  }
}

/**
 * Whether a run's steps may replay: data-parallel (whose loss reads nothing but its tensors; a method that builds
 * tensors from the labels on the host could make two steps' constants agree by chance), and no plugins.
 */
export function replayable(cfg: { method: string; plugins: readonly string[] }): boolean {
  return cfg.method === 'data-parallel' && cfg.plugins.length === 0;
}

/**
 * A device's `StepReplay` for what it trains now: `attached`, the model with its buffers, groups and collective (a new
 * attach: a fresh one, the old one's released, as its kernels' collectives and hooks may be others).
 */
export class DeviceReplays {
  private current?: { attached: object; replay: StepReplay };

  /** `enabled`: the run may replay at all (no plugins). */
  of(tf: Tf, attached: object, enabled: boolean): StepReplay {
    if (this.current?.attached !== attached) {
      this.current?.replay.dispose();
      this.current = { attached, replay: new StepReplay(tf, tf.backend() as unknown as TraceBackend, enabled) };
    }
    return this.current.replay;
  }
}
