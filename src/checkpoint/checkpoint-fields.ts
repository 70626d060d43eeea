/**
 * A decoded checkpoint is data from outside: its checksum proves it whole, not that tandem wrote it (a crafted file
 * recomputes it). Every field is checked here, before the run uses any, with a BAD_CHECKPOINT naming the field: its
 * type, the lengths that go together, step ≥ 0, finite values. What only the run knows (the model's sizes, the
 * optimizer's slots) is checked by `checkAgainstRun`.
 */
import { TandemError } from '../errors.js';
import type { Checkpoint } from './checkpoint-types.js';

/** The most entries an array of a checkpoint may have (weights, slots, heads, ranks). */
const MAX_ENTRIES = 1 << 20;

type Fail = (field: string, what: string) => never;

function failer(file: string): Fail {
  return (field, what) => {
    throw new TandemError(
      'BAD_CHECKPOINT',
      `checkpoint ${file}: field ${field} ${what} (not a checkpoint tandem wrote: it was crafted or altered); resume ` +
        'from a checkpoint this run wrote',
    );
  };
}

function floats(v: unknown, field: string, fail: Fail): Float32Array {
  if (!(v instanceof Float32Array)) fail(field, `is ${describe(v)}, expected a Float32Array`);
  for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i])) fail(`${field}[${i}]`, `is ${v[i]}, not finite`);
  return v;
}

function list<T>(v: unknown, field: string, fail: Fail, each: (x: unknown, field: string) => T): T[] {
  if (!Array.isArray(v)) fail(field, `is ${describe(v)}, expected an array`);
  if (v.length > MAX_ENTRIES) fail(field, `has ${v.length} entries, over ${MAX_ENTRIES}`);
  return v.map((x, i) => each(x, `${field}[${i}]`));
}

/** What `v` is, in a few words; never throws (a decoded payload may hold a BigInt, which JSON.stringify refuses). */
function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name} of ${(v as Float32Array).length}`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${(typeof v === 'string' ? JSON.stringify(v) : String(v)).slice(0, 40)}`;
}

/** Deepest nesting a hook's options may have (tandem's hooks take flat options). */
const MAX_OPTION_DEPTH = 8;

/**
 * A hook's options as JSON holds them (the run compares them with its own as JSON): plain objects and arrays, finite
 * numbers, strings, booleans, null, nested at most MAX_OPTION_DEPTH (a cycle, a BigInt, a Map or a Date is refused).
 */
function plainOptions(v: unknown, field: string, fail: Fail, depth = 0): void {
  if (depth > MAX_OPTION_DEPTH) fail(field, `is nested deeper than ${MAX_OPTION_DEPTH}`);
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) fail(field, `is ${v}, not finite`);
    return;
  }
  if (Array.isArray(v)) {
    list(v, field, fail, (x, f) => plainOptions(x, f, fail, depth + 1));
    return;
  }
  if (typeof v !== 'object' || Object.getPrototypeOf(v) !== Object.prototype)
    fail(field, `is ${typeof v === 'object' ? Object.prototype.toString.call(v) : describe(v)}, expected a JSON value`);
  for (const [k, x] of Object.entries(v)) plainOptions(x, `${field}.${k}`, fail, depth + 1);
}

function record(v: unknown, field: string, fail: Fail): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || ArrayBuffer.isView(v))
    fail(field, `is ${describe(v)}, expected an object`);
  return v as Record<string, unknown>;
}

function shapes(v: unknown, field: string, fail: Fail): { name: string; shape: number[] }[] {
  return list(v, field, fail, (w, f) => {
    const o = record(w, f, fail);
    if (typeof o.name !== 'string') fail(`${f}.name`, `is ${describe(o.name)}, expected a string`);
    const shape = list(o.shape, `${f}.shape`, fail, (d, g) => {
      if (!Number.isSafeInteger(d) || (d as number) < 0) fail(g, `is ${describe(d)}, expected a size`);
      return d as number;
    });
    return { name: o.name, shape };
  });
}

/** The floats a list of shapes holds, overflow-checked. */
export function sizeOf(ws: { shape: number[] }[]): number {
  let total = 0;
  for (const w of ws) total += w.shape.reduce((a, b) => a * b, 1);
  return Number.isSafeInteger(total) ? total : Infinity;
}

/** `value` (a decoded payload) as a Checkpoint, every field's type and the lengths that go together checked. */
export function checkFields(value: unknown, file: string): Checkpoint {
  const fail: Fail = failer(file);
  const c = record(value, 'checkpoint', fail);
  if (!Number.isSafeInteger(c.step) || (c.step as number) < 0) fail('step', `is ${describe(c.step)}, expected ≥ 0`);
  const weights = shapes(c.weights, 'weights', fail);
  const params = floats(c.params, 'params', fail);
  if (params.length !== sizeOf(weights))
    fail('params', `has ${params.length} floats, and its weights' shapes hold ${sizeOf(weights)}`);
  const optimizerState = list(c.optimizerState, 'optimizerState', fail, (s, f) => floats(s, f, fail));
  const fingerprint = c.fingerprint;
  if (typeof fingerprint !== 'string') fail('fingerprint', `is ${describe(fingerprint)}, expected a string`);
  const out: Checkpoint = { step: c.step as number, weights, params, optimizerState, fingerprint };
  if (c.heads !== undefined)
    out.heads = list(c.heads, 'heads', fail, (h, f) => {
      const o = record(h, f, fail);
      const head = {
        w: floats(o.w, `${f}.w`, fail),
        state: list(o.state, `${f}.state`, fail, (g, gf) => list(g, gf, fail, (s, sf) => floats(s, sf, fail))),
      };
      return o.b === undefined ? head : { ...head, b: floats(o.b, `${f}.b`, fail) };
    });
  if (c.state !== undefined || c.stateWeights !== undefined) {
    out.state = floats(c.state, 'state', fail);
    out.stateWeights = shapes(c.stateWeights, 'stateWeights', fail);
    if (out.state.length !== sizeOf(out.stateWeights))
      fail('state', `has ${out.state.length} floats, and stateWeights' shapes hold ${sizeOf(out.stateWeights)}`);
  }
  if (c.commHook !== undefined) {
    const h = record(c.commHook, 'commHook', fail);
    const name = h.name;
    if (typeof name !== 'string') fail('commHook.name', `is ${describe(name)}, expected a string`);
    const ranks = list(h.ranks, 'commHook.ranks', fail, (r, f) =>
      list(r, f, fail, (g, gf) => list(g, gf, fail, (s, sf) => floats(s, sf, fail))),
    );
    const options = record(h.options, 'commHook.options', fail);
    plainOptions(options, 'commHook.options', fail);
    out.commHook = { name, options, ranks };
  }
  return out;
}

/**
 * The checkpoint's arrays against this run's buffers: `params` floats of parameters, optimizer slots of `slots`
 * floats each, `state` floats of non-trainable weights; BAD_CHECKPOINT naming the field that does not fit.
 */
export function checkAgainstRun(
  ckpt: Checkpoint,
  file: string,
  run: { params: number; slots: number[]; state: number },
): void {
  const fail: Fail = failer(file);
  if (ckpt.params.length !== run.params)
    fail('params', `has ${ckpt.params.length} floats, and this run's model has ${run.params} parameters`);
  if (ckpt.optimizerState.length !== run.slots.length)
    fail(
      'optimizerState',
      `has ${ckpt.optimizerState.length} state vectors, and this run's optimizer keeps ${run.slots.length}`,
    );
  ckpt.optimizerState.forEach((s, j) => {
    if (s.length !== run.slots[j])
      fail(`optimizerState[${j}]`, `has ${s.length} floats, and this run's optimizer slot holds ${run.slots[j]}`);
  });
  if (run.state > 0 && ckpt.state && ckpt.state.length !== run.state)
    fail('state', `has ${ckpt.state.length} floats, and this run's model has ${run.state} non-trainable values`);
}
