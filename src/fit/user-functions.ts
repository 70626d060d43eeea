/**
 * A loss or metric that `compile` got as the user's own function `(yTrue, yPred) => Tensor`. A function cannot cross
 * to a device thread, so its source text goes there (in the outputs' spec, fit-outputs.ts, a file of fit's private
 * directory; never over the network: each host reads its own function) and each thread rebuilds it with tfjs's
 * namespace as `tf` in scope. Before a thread starts, the main thread rebuilds it too and runs both on the same probe
 * tensors: a function that reads anything but its arguments and `tf` (a variable of its closure, a named import)
 * cannot be rebuilt, and is refused with the way out, rather than failing on a device or computing something else.
 */
import type * as tfNs from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import type { Tensor, Tf } from '../engine/tfjs-types.js';
import { functionName } from './fit-metrics.js';

/** A user's loss or metric function, as the device threads rebuild it. */
export interface UserFunction {
  /** The function's name (tfjs names a metric's History key by it), or '' when it has none. */
  name: string;
  source: string;
}

type LossFn = (yTrue: Tensor, yPred: Tensor) => Tensor;

const rebuilt = new Map<string, LossFn>();

/** The function of `source`, with `tf` in scope: an expression (arrow, function), or a method's shorthand. */
function compiled(tf: Tf, source: string): LossFn {
  const make = (text: string) => new Function('tf', `"use strict"; return (${text});`) as (tf: Tf) => unknown;
  let factory: (tf: Tf) => unknown;
  try {
    factory = make(source);
  } catch {
    factory = make(`function ${source.replace(/^async\s+/, '')}`); // `loss(yTrue, yPred) { … }` of an object
  }
  const fn = factory(tf);
  if (typeof fn !== 'function') throw new TypeError(`its source gives ${typeof fn}, not a function`);
  return fn as LossFn;
}

/**
 * The losses tfjs-layers' `compile` takes by name that tandem has no loss of its own for: they train as functions,
 * each thread taking tfjs's own function from a model of no weights compiled with that name (`tfjsLoss`).
 */
export const TFJS_ONLY_LOSSES: readonly string[] = [
  'hinge',
  'squaredHinge',
  'categoricalHinge',
  'kullbackLeiblerDivergence',
  'cosineProximity',
];

/** tfjs-layers' loss of `name` (one of TFJS_ONLY_LOSSES) as a function each thread rebuilds: tfjs's own. */
export function tfjsLoss(name: string): UserFunction {
  const model =
    'const i = tf.input({ shape: [1] }); ' +
    "const m = tf.model({ inputs: i, outputs: tf.layers.activation({ activation: 'linear' }).apply(i) }); " +
    `m.compile({ optimizer: 'sgd', loss: ${JSON.stringify(name)} }); m.optimizer.dispose();`;
  return { name, source: `(() => { ${model} return m.lossFunctions[0]; })()` };
}

/** The function of `f` on this thread's tfjs (rebuilt once per source). */
export function userFunction(tf: Tf, f: UserFunction): LossFn {
  const key = f.source;
  let fn = rebuilt.get(key);
  if (!fn) {
    fn = compiled(tf, key);
    rebuilt.set(key, fn);
  }
  return fn;
}

/** The batch mean of `f` on targets `y` and outputs `p`, as tfjs-layers reduces a loss or metric function's value. */
export function userFunctionMean(tf: Tf, f: UserFunction, y: Tensor, p: Tensor): Tensor {
  const value = userFunction(tf, f)(y, p);
  if (!(value instanceof tf.Tensor))
    throw new TandemError('BAD_CONFIG', `${describe(f)} returned ${typeof value}, not a tensor`);
  return tf.mean(value);
}

function describe(f: UserFunction, what = 'function'): string {
  return f.name ? `${what} ${f.name}` : `an unnamed ${what}`;
}

/** The values of `fn(y, p)` in a tidy, or the error it threw. */
function outcome(tf: typeof tfNs, fn: LossFn, y: Tensor, p: Tensor): Float32Array | Error {
  try {
    return tf.tidy(() => {
      const out = fn(y, p);
      return out instanceof tf.Tensor ? Float32Array.from(out.dataSync()) : new Float32Array();
    });
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

const same = (a: Float32Array, b: Float32Array) =>
  a.length === b.length && a.every((v, i) => Object.is(v, b[i]) || (Number.isNaN(v) && Number.isNaN(b[i])));

/**
 * `fn` as the device threads will rebuild it, checked on the main thread: rebuilt from its source with `tf`, it must
 * give what `fn` gives on probe targets `y` and outputs `p`. `what` names it in the refusal ("loss of output y").
 */
export function userFunctionOf(tf: typeof tfNs, fn: LossFn, what: string, y: Tensor, p: Tensor): UserFunction {
  const f: UserFunction = { name: functionName(fn), source: fn.toString() };
  const refuse = (why: string) =>
    new TandemError(
      'BAD_CONFIG',
      `${what} (${describe(f)}) cannot run on the device threads: ${why}. A loss or metric function goes to each ` +
        'device as its source text and is rebuilt there with tfjs as `tf`: write it as `(yTrue, yPred) => …` using ' +
        'only its arguments and `tf.*` (no variable from around it, no named import; put a constant inside it)',
    );
  if (/\{\s*\[native code\]\s*\}\s*$/.test(f.source)) throw refuse('it is built in or bound, so its source is hidden');
  let copy: LossFn;
  try {
    copy = userFunction(tf as unknown as Tf, f);
  } catch (err) {
    throw refuse(`its source does not parse alone (${(err as Error).message})`);
  }
  const [want, got] = [outcome(tf, fn, y, p), outcome(tf, copy, y, p)];
  if (got instanceof Error && !(want instanceof Error)) throw refuse(`rebuilt, it throws: ${got.message}`);
  if (want instanceof Float32Array && got instanceof Float32Array && !same(want, got))
    throw refuse('rebuilt, it gives other values than the function given (it reads a value from around it)');
  if (perSample(tf, fn, y, p) === false)
    throw new TandemError(
      'BAD_CONFIG',
      `${what} (${describe(f)}) computes over a batch's samples together: its mean on ${y.shape[0]} probe samples ` +
        'is not the mean of its means on their halves. tandem splits each batch over the devices, so it would ' +
        "give another value than model.fit's; return one value per sample (tfjs takes their mean), or compute it " +
        'on the model after fit (model.evaluate, model.predict)',
    );
  return f;
}

/**
 * Whether `fn`'s batch mean is the mean of its samples' (so that the devices' shares of a batch, weighed by their
 * rows, give the batch's value): its mean on `y`, `p` against its means on their two halves. Undefined where it
 * cannot tell (one row; the function throws).
 */
function perSample(tf: typeof tfNs, fn: LossFn, y: Tensor, p: Tensor): boolean | undefined {
  const rows = y.shape[0] ?? 0;
  if (rows < 2) return undefined;
  const half = Math.floor(rows / 2);
  const mean = (from: number, count: number) =>
    tf.mean(fn(y.slice(from, count), p.slice(from, count)) as tfNs.Tensor).dataSync()[0];
  try {
    return tf.tidy(() => {
      const [whole, parts] = [mean(0, rows), (mean(0, half) * half + mean(half, rows - half) * (rows - half)) / rows];
      return Math.abs(whole - parts) <= 1e-5 * Math.max(1, Math.abs(whole));
    });
  } catch {
    return undefined;
  }
}
