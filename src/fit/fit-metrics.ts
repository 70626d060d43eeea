/**
 * A compiled model's metrics as tandem's threads take them: each by the name of the tfjs function `compile` resolved
 * it to (`'accuracy'` → binaryAccuracy, categoricalAccuracy or sparseCategoricalAccuracy for the loss; `'mse'` →
 * meanSquaredError; `tf.metrics.recall` → recall), in `model.metricsNames` order; a function tandem cannot name (one of
 * the user's own, r2Score) is refused, naming it and the way out.
 */
import type * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import type { FitCaller } from './fit-caller.js';
import { METRIC_FUNCTIONS } from '../model/metric-values.js';

/** The compiled model's metric functions and the outputs they are of (tfjs-layers' own field). */
type Compiled = { metricsTensors?: [(...a: unknown[]) => unknown, number][] };

/** `fn`'s name without the `$1` that tfjs's bundle appends to names that clash. */
export function functionName(fn: { name: string }): string {
  return fn.name.replace(/\$\d+$/, '');
}

/** The tf.metrics name tandem computes `fn` by, or null: a function of the user's own (or no function). */
export function tfjsMetricName(fn: unknown): string | null {
  const name = typeof fn === 'function' ? functionName(fn) : '';
  return METRIC_FUNCTIONS.includes(name) ? name : null;
}

/**
 * The tfjs function names of `model`'s compiled metrics (after `loss`, in metricsNames order); `what` names the caller
 * in the refusal.
 */
export function metricFunctionsOf(model: tf.LayersModel, what: FitCaller): string[] {
  const compiled = (model as unknown as Compiled).metricsTensors ?? [];
  const keys = model.metricsNames.slice(1);
  return compiled.map(([fn], i) => {
    if (typeof fn !== 'function') throw noMetricFunction(keys[i], model.outputNames[0]);
    const known = tfjsMetricName(fn);
    if (known) return known;
    const name = functionName(fn);
    throw new TandemError(
      'BAD_CONFIG',
      `${what}: metric '${keys[i] ?? name}' (${name ? `function ${name}` : 'an unnamed function'}) is not one tandem ` +
        `computes across devices; it computes ${METRIC_FUNCTIONS.join(', ')} (by name or as tf.metrics.<name>): ` +
        'compile with those, or compute the metric on the model after fit (model.evaluate, model.predict)',
    );
  });
}

type MetricFn = (yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor;

/** A metric function name as tfjs's `compile` takes it on a worker: tf.metrics' function, else the name. */
export function compileMetric(tfjs: typeof tf, name: string): string | MetricFn {
  const fn = (tfjs.metrics as unknown as Record<string, unknown>)[name];
  return typeof fn === 'function' ? (fn as MetricFn) : name;
}

/** A compiled metric that is no function: tfjs 4.22 compiles a list of lists so (and its model.fit fails on it). */
export function noMetricFunction(key: string, output: string): TandemError {
  return new TandemError(
    'BAD_CONFIG',
    `fit: metric '${key}' of output ${output} is no function: tfjs 4.22's compile makes none of a list per output ` +
      "(metrics: [['acc'], ['mse']]; its own model.fit fails on it too); give metrics as { outputName: ['acc'] }, " +
      "or one list for every output (metrics: ['acc'])",
  );
}
