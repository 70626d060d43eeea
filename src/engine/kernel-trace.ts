/**
 * A step's kernels, recorded once and replayed. One training step on a device runs the same backend kernels on the same
 * shapes every step; what tfjs does around them (the layers' `apply`, the engine's bookkeeping per tensor, the tape
 * and its walk) is the same work again, and on one core it is a third of the step. A trace holds the step's top-level
 * kernel calls (the kernel function, its attributes, where each input comes from) and the caller's marks between
 * them; `replayTrace` runs those kernel functions again, in order, on this step's variables and inputs, and hands each
 * mark back to the caller at its place.
 *
 * What a trace cannot see it refuses to hold: a read of a kernel's output the caller did not mark (`markRead`:
 * its value may steer JavaScript), a kernel run from inside another (only the outer one is recorded). A tensor made
 * outside kernels (a scalar, a mask) is a constant of the trace, kept with its values: two traces of consecutive
 * steps are equal (`sameTrace`) only when their constants are the same numbers, so a value that changes from step to
 * step (a dropout mask, a value read back) keeps the step on tfjs.
 *
 * @example
 * const r = startRecording(backend, vars, [xs, ys]); try { step(); } finally { trace = r.finish(); }
 * replayTrace(trace, backend, { variables: vars, inputs: [xs, ys], onMark: (m, tensors) => ... });
 */
import type { KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import type { Tf } from './tfjs-types.js';

type DataId = TensorInfo['dataId'];
type Dtype = TensorInfo['dtype'];

/** Where a kernel's input comes from: an earlier call's output, a variable, the step's input, a constant. */
export type TraceRef =
  | { kind: 'value'; id: number }
  | { kind: 'variable'; id: number }
  | { kind: 'input'; index: number }
  | { kind: 'constant'; index: number };

interface TraceInput {
  name: string;
  ref: TraceRef;
  shape: number[];
  dtype: Dtype;
}

interface TraceCall {
  name: string;
  kernel: KernelFunc;
  attrs: NamedAttrMap;
  inputs: TraceInput[];
  /** The inputs were an array (Concat's, AddN's, Pack's tensors), not a map of names. */
  inputList: boolean;
  /** Each output's value id, shape and dtype. */
  outputs: { id: number; shape: number[]; dtype: Dtype }[];
}

/** A caller's mark before call `at`, with the tensors it names. */
interface TraceMark<M> {
  at: number;
  mark: M;
  tensors: TraceInput[];
}

/** What the backend must offer: the cpu backend's data store and reference counts. */
export interface TraceBackend {
  data: { get(dataId: DataId): { values?: unknown } | undefined; has(dataId: DataId): boolean };
  incRef(dataId: DataId): void;
  disposeData(dataId: DataId, force?: boolean): boolean;
}

export interface KernelTrace<M> {
  readonly calls: readonly TraceCall[];
  readonly marks: readonly TraceMark<M>[];
  /** Tensors made outside kernels, held (a reference each) for as long as the trace is. */
  readonly constants: readonly { info: TensorInfo; values: unknown }[];
}

/** A tensor's identity: a variable (whose data the step may replace) or a tensor. */
export type Source = { readonly dataId: DataId };

const SOURCE_IDS = new WeakMap<Source, number>();
let nextSourceId = 0;

/** A variable's id in traces: the same object, the same id, whatever its data is now. */
export function sourceId(v: Source): number {
  let id = SOURCE_IDS.get(v);
  if (id === undefined) SOURCE_IDS.set(v, (id = nextSourceId++));
  return id;
}

/** tfjs's kernels whose outputs' shapes depend on their inputs' values: a step running one is not recorded. */
const VALUE_SHAPED = new Set([
  'Unique',
  'NonMaxSuppressionV3',
  'NonMaxSuppressionV4',
  'NonMaxSuppressionV5',
  'Where',
  'SparseFillEmptyRows',
  'SparseReshape',
  'SparseSegmentMean',
  'SparseSegmentSum',
  'RaggedGather',
  'RaggedRange',
  'RaggedTensorToTensor',
  'StringNGrams',
  'StringSplit',
]);

/** The recorder of this thread, while one records. */
const ACTIVE: { recorder?: TraceRecorder<unknown> } = {};

/** The kernel functions `recordable` made. */
const RECORDABLE = new WeakSet<KernelFunc>();
/** The backends whose kernels were made recordable. */
const RECORDED_BACKENDS = new Set<string>();

/** Whether the kernels of `tf`'s current backend are recorded (the native backend's). */
export function backendRecordable(tf: Tf): boolean {
  return RECORDED_BACKENDS.has(tf.getBackend());
}

/** Every kernel registered for `backendName` recordable (those registered since the last call too). */
export function wrapBackendKernels(tf: Tf, backendName: string): void {
  RECORDED_BACKENDS.add(backendName);
  for (const k of tf.getKernelsForBackend(backendName)) {
    if (RECORDABLE.has(k.kernelFunc)) continue;
    tf.unregisterKernel(k.kernelName, backendName);
    tf.registerKernel({ ...k, kernelFunc: recordable(k.kernelName, k.kernelFunc) });
  }
}

/**
 * `kernel` as the backend registers it: recorded while a recorder is active and no other recorded kernel is running
 * (a kernel that runs kernels is one call).
 */
function recordable(name: string, kernel: KernelFunc): KernelFunc {
  const wrapped: KernelFunc = args => {
    const r = ACTIVE.recorder;
    if (r === undefined || r.depth > 0) return kernel(args);
    r.depth++;
    try {
      const out = kernel(args);
      r.called(name, kernel, args.inputs as Record<string, TensorInfo | undefined>, args.attrs ?? {}, out);
      return out;
    } finally {
      r.depth--;
    }
  };
  RECORDABLE.add(wrapped);
  return wrapped;
}

/** The backend read `dataId` for JavaScript (dataSync): a recording that did not declare it cannot be replayed. */
export function noteRead(dataId: DataId): void {
  ACTIVE.recorder?.read(dataId);
}

/** A read mark: JavaScript is about to read `t` as `name`; its replay reads it at the same place. */
export interface ReadMark {
  kind: 'read';
  name: string;
}

/** `t` is read next for `name` (a loss, a count): a mark at this place, and the read allowed in the recording. */
export function markRead(name: string, t: TensorInfo): void {
  const r = ACTIVE.recorder;
  if (r === undefined) return;
  r.declared.add(t.dataId);
  r.mark({ kind: 'read', name } satisfies ReadMark, [t]);
}

/** A mark at this point of the recording (nothing when none records). */
export function traceMark<M>(mark: M, tensors: readonly TensorInfo[] = []): void {
  (ACTIVE.recorder as TraceRecorder<M> | undefined)?.mark(mark, tensors);
}

/** A mark of a hook: JavaScript that reads only its tensors, run in a step and again at its place in a replay. */
export interface HookMark {
  kind: 'hook';
  id: number;
}

const HOOKS: { run: (tensors: readonly TensorInfo[]) => void; writes: readonly Source[] }[] = [];

/**
 * A hook's id: `run` reads only the tensors it is given (and writes only `writes`: a moving average's variables), so
 * that a replay can run it again at its place with that step's tensors.
 */
export function registerTraceHook(run: (tensors: readonly TensorInfo[]) => void, writes: readonly Source[]): number {
  return HOOKS.push({ run, writes }) - 1;
}

/** Runs hook `id` on `tensors` now; in a recording, marked (its writes allowed) for the replay to run it there. */
export function runTraceHook(id: number, tensors: readonly TensorInfo[]): void {
  const hook = HOOKS[id];
  const r = ACTIVE.recorder;
  if (r !== undefined) {
    r.mark({ kind: 'hook', id } satisfies HookMark, tensors);
    for (const v of hook.writes) r.allowWrite(v);
  }
  hook.run(tensors);
}

/** A replay reached hook `id`'s mark: runs it on the replay's tensors. */
export function replayTraceHook(id: number, tensors: readonly TensorInfo[]): void {
  HOOKS[id].run(tensors);
}

/** Whether this thread is recording a trace now. */
export function recording(): boolean {
  return ACTIVE.recorder !== undefined;
}

/**
 * Records this thread's kernels until `finish`. `variables`: those the step reads (their data may be replaced between
 * kernels, never by a kernel's output); `watched`: every other variable, which the step must leave as it is (a
 * moving average written in a step would not be written by its replay).
 */
export function startRecording<M>(
  backend: TraceBackend,
  variables: readonly Source[],
  inputs: readonly TensorInfo[],
  watched: readonly Source[],
): TraceRecorder<M> {
  if (ACTIVE.recorder) throw new Error('kernel-trace: a recording is already active on this thread');
  const r = new TraceRecorder<M>(backend, variables, inputs, watched);
  ACTIVE.recorder = r as TraceRecorder<unknown>;
  return r;
}

export class TraceRecorder<M> {
  depth = 0;
  readonly declared = new Set<DataId>();
  private readonly calls: TraceCall[] = [];
  private readonly marks: TraceMark<M>[] = [];
  private readonly constants: { info: TensorInfo; values: unknown }[] = [];
  private readonly produced = new Map<DataId, number>();
  /** Outputs on new data (not an input's, as a reshape's). */
  private readonly fresh = new Set<DataId>();
  private nextValue = 0;
  private spoiled?: string;
  private readonly before: Map<Source, DataId>;
  /** The other variables: read through the variable (its data now), never as a constant of the recording. */
  private readonly others: readonly Source[];

  constructor(
    private readonly backend: TraceBackend,
    private readonly variables: readonly Source[],
    private readonly inputs: readonly TensorInfo[],
    watched: readonly Source[],
  ) {
    this.others = watched.filter(v => !variables.includes(v));
    this.before = new Map(this.others.map(v => [v, v.dataId]));
  }

  called(
    name: string,
    kernel: KernelFunc,
    inputs: Record<string, TensorInfo | undefined>,
    attrs: NamedAttrMap,
    out: unknown,
  ) {
    if (VALUE_SHAPED.has(name)) this.spoil(`${name}'s output shape depends on its input's values`);
    const ins: TraceInput[] = [];
    for (const [key, t] of Object.entries(inputs)) if (t !== undefined) ins.push(this.input(key, t));
    const outs = (Array.isArray(out) ? out : [out]) as TensorInfo[];
    for (const o of outs) if (!Object.values(inputs).some(t => t?.dataId === o.dataId)) this.fresh.add(o.dataId);
    const outputs = outs.map(o => ({ id: this.produce(o.dataId), shape: [...o.shape], dtype: o.dtype }));
    this.calls.push({ name, kernel, attrs, inputs: ins, inputList: Array.isArray(inputs), outputs });
  }

  mark(mark: M, tensors: readonly TensorInfo[]): void {
    this.marks.push({ at: this.calls.length, mark, tensors: tensors.map(t => this.input('', t)) });
  }

  read(dataId: DataId): void {
    if (this.depth > 0) return; // a kernel reading its inputs: part of the call
    // any tensor read for JavaScript: a kernel's output, and also an input or a variable, whose values could make a
    // tensor outside kernels that two steps' recordings happen to agree on
    if (!this.declared.has(dataId)) this.spoiled ??= 'a tensor was read';
  }

  /** A variable a hook of the step writes: not a reason to refuse the recording. */
  allowWrite(v: Source): void {
    this.before.delete(v);
  }

  spoil(reason: string): void {
    this.spoiled ??= reason;
  }

  /** Ends the recording: the trace, or why there is none (its constants released). */
  finish(): KernelTrace<M> | { spoiled: string } {
    if (ACTIVE.recorder === (this as TraceRecorder<unknown>)) ACTIVE.recorder = undefined;
    for (const [v, dataId] of this.before) if (v.dataId !== dataId) this.spoil('the step wrote a variable');
    if (this.variables.some(v => this.fresh.has(v.dataId))) this.spoil("a variable holds a kernel's output");
    const trace = { calls: this.calls, marks: this.marks, constants: this.constants };
    if (this.spoiled === undefined) return trace;
    releaseTrace(trace, this.backend);
    return { spoiled: this.spoiled };
  }

  private produce(dataId: DataId): number {
    const id = this.nextValue++;
    this.produced.set(dataId, id);
    return id;
  }

  private input(name: string, t: TensorInfo): TraceInput {
    return { name, ref: this.refOf(t), shape: [...t.shape], dtype: t.dtype };
  }

  private refOf(t: TensorInfo): TraceRef {
    const value = this.produced.get(t.dataId);
    if (value !== undefined) return { kind: 'value', id: value };
    const variable = this.variables.find(v => v.dataId === t.dataId) ?? this.others.find(v => v.dataId === t.dataId);
    if (variable) return { kind: 'variable', id: sourceId(variable) };
    const input = this.inputs.findIndex(i => i.dataId === t.dataId);
    if (input >= 0) return { kind: 'input', index: input };
    let constant = this.constants.findIndex(c => c.info.dataId === t.dataId);
    if (constant < 0) {
      const values = this.backend.data.get(t.dataId)?.values;
      if (!ArrayBuffer.isView(values)) this.spoil('a constant without host values');
      this.backend.incRef(t.dataId);
      constant = this.constants.push({ info: { ...t, shape: [...t.shape] }, values: copyOf(values) }) - 1;
    }
    return { kind: 'constant', index: constant };
  }
}

function copyOf(values: unknown): unknown {
  return ArrayBuffer.isView(values) ? (values as unknown as { slice(): unknown }).slice() : values;
}

/** Drops the trace's hold on its constants. */
export function releaseTrace(trace: KernelTrace<unknown>, backend: TraceBackend): void {
  for (const c of trace.constants) if (backend.data.has(c.info.dataId)) backend.disposeData(c.info.dataId);
}
