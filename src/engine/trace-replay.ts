/**
 * A recorded step (kernel-trace.ts) run again, and the test of whether a recording can stand for the next step: two
 * consecutive steps' traces equal in every call, attribute, source, mark and constant.
 */
import type { TensorInfo } from '@tensorflow/tfjs-core';
import { sourceId, type KernelTrace, type Source, type TraceBackend, type TraceRef } from './kernel-trace.js';

type DataId = TensorInfo['dataId'];

export interface ReplayEnv<M> {
  /** Every variable the recording may read (their data may change at a mark: read at each call). */
  variables: ReplayVariables;
  /** This step's inputs, in the recording's order. */
  inputs: readonly TensorInfo[];
  /** A mark reached, with the tensors it names (valid until the replay ends). */
  onMark(mark: M, tensors: TensorInfo[]): void;
}

/**
 * The variables a replay may read, by source id (kernel-trace.ts's sourceId): indexed once and kept from step to
 * step, indexed again from `all` when a recorded one is missing or disposed (a variable made or replaced since).
 */
export class ReplayVariables {
  private byId = new Map<number, Source>();

  constructor(private readonly all: () => readonly Source[]) {}

  /** Variable `id`'s data now. */
  dataId(id: number): DataId {
    let v = this.byId.get(id);
    if (!v || disposed(v)) {
      this.byId = new Map(this.all().map(s => [sourceId(s), s]));
      v = this.byId.get(id);
    }
    if (!v || disposed(v))
      throw new Error(`step replay: variable ${id} of the recording is not among the step's variables`);
    return v.dataId;
  }
}

function disposed(v: Source): boolean {
  return (v as { isDisposed?: boolean }).isDisposed === true;
}

/**
 * Runs the trace's kernels in order on `env`'s variables and inputs, each mark at its place; every tensor the kernels
 * made is released at the end (also when a mark or a kernel throws).
 */
export function replayTrace<M>(trace: KernelTrace<M>, backend: TraceBackend, env: ReplayEnv<M>): void {
  const values: DataId[] = [];
  const made = new Set<DataId>();
  // data the replay did not make (variables', inputs', constants'): an output on it (a reshape's, a reshape of that
  // reshape's) holds a reference, given back at the end; only the replay's own data is freed
  const externals = new Set<DataId>();
  const aliases: DataId[] = [];
  const info = inputsOf(trace, env, values);
  let mark = 0;
  const marksAt = (at: number) => {
    for (; mark < trace.marks.length && trace.marks[mark].at === at; mark++) {
      const m = trace.marks[mark];
      env.onMark(m.mark, m.tensors.map(info));
    }
  };
  try {
    trace.calls.forEach((call, at) => {
      marksAt(at);
      const inputs: Record<string, TensorInfo> = call.inputList ? ([] as unknown as Record<string, TensorInfo>) : {};
      for (const i of call.inputs) {
        inputs[i.name] = info(i);
        if (i.ref.kind !== 'value') externals.add(inputs[i.name].dataId);
      }
      const out = call.kernel({ inputs, attrs: call.attrs, backend: backend as never });
      const outs = (Array.isArray(out) ? out : [out]) as TensorInfo[];
      call.outputs.forEach((o, k) => {
        if (!sameShape(outs[k].shape, o.shape))
          throw new Error(`step replay: ${call.name} gave [${outs[k].shape}] where the recording had [${o.shape}]`);
        const id = outs[k].dataId;
        values[o.id] = id;
        if (externals.has(id)) aliases.push(id);
        else made.add(id);
      });
    });
    marksAt(trace.calls.length);
  } finally {
    for (const id of made) if (backend.data.has(id)) backend.disposeData(id, true);
    for (const id of aliases) if (backend.data.has(id)) backend.disposeData(id, false);
  }
}

type Input = { ref: TraceRef; shape: number[]; dtype: TensorInfo['dtype'] };

/** A recorded input as this replay's tensor: its source now (`values`: the replay's outputs so far), its shape. */
function inputsOf<M>(trace: KernelTrace<M>, env: ReplayEnv<M>, values: DataId[]): (i: Input) => TensorInfo {
  const variable = (id: number): DataId => env.variables.dataId(id);
  const resolve = (ref: TraceRef): DataId => {
    switch (ref.kind) {
      case 'value':
        return values[ref.id];
      case 'variable':
        return variable(ref.id);
      case 'input':
        return env.inputs[ref.index].dataId;
      case 'constant':
        return trace.constants[ref.index].info.dataId;
      default:
        return ref satisfies never;
    }
  };
  return i => ({ dataId: resolve(i.ref), shape: i.shape, dtype: i.dtype });
}

/** Whether `b` (a later step's recording) runs what `a` runs: the same calls, sources, marks and constants. */
export function sameTrace<M>(a: KernelTrace<M>, b: KernelTrace<M>): boolean {
  if (a.calls.length !== b.calls.length || a.marks.length !== b.marks.length) return false;
  if (a.constants.length !== b.constants.length) return false;
  const callsEqual = a.calls.every((c, i) => {
    const d = b.calls[i];
    return (
      c.name === d.name &&
      c.kernel === d.kernel &&
      deepEqual(c.attrs, d.attrs) &&
      deepEqual(c.inputs, d.inputs) &&
      deepEqual(c.outputs, d.outputs)
    );
  });
  const marksEqual = a.marks.every((m, i) => deepEqual(m, b.marks[i]));
  const constantsEqual = a.constants.every((c, i) => {
    const d = b.constants[i];
    return deepEqual(c.info.shape, d.info.shape) && c.info.dtype === d.info.dtype && sameBits(c.values, d.values);
  });
  return callsEqual && marksEqual && constantsEqual;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

function sameBits(a: unknown, b: unknown): boolean {
  if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.byteLength !== b.byteLength) return false;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return x.every((v, i) => v === y[i]);
}

/** Structural equality of plain data (attributes, sources, marks): numbers by their bits, NaN equal to NaN. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) return sameBits(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a),
    kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every(
    k => Object.hasOwn(b, k) && deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
  );
}
