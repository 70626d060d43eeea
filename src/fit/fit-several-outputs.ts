/**
 * `fit` of a model of several outputs (fit-outputs.ts): `y` (and validationData's targets) as one flat target row per
 * sample, the flat-output wrapper the devices train, and what the run needs: the outputs' spec, the targets, the
 * fit-outputs method and the plugin that registers it on every thread.
 */
import * as tf from '#tfjs';
import type { FitArgs } from './fit-args.js';
import type { FitTargets } from './fit-targets.js';
import {
  flatOutputModel,
  flatTargets,
  outputsOf,
  outputsSpec,
  outputsTargets,
  type OutputsSpec,
} from './fit-outputs.js';
import { FIT_OUTPUTS_METHOD_NAME } from './fit-outputs-method.js';
import { outputClassWeights } from './fit-class-weight.js';

/** `y` as fit takes it: a Tensor; for a model of several outputs a Tensor[] or `{ outputName: Tensor }`. */
export type FitY = tf.Tensor | tf.Tensor[] | Record<string, tf.Tensor>;

/** What the run of a model of several outputs needs beside fit's own. */
export interface OutputsRun {
  spec: OutputsSpec;
  /** classWeight: each output's weight per class id, or null (only the training's losses are weighted). */
  classWeights?: (number[] | null)[];
  targets: FitTargets;
  method: string;
  plugin: string;
}

/** A model of several outputs: its flat targets, args with flat validation targets, the wrapper and the run's parts. */
export function severalOutputs(
  model: tf.LayersModel,
  y: FitY,
  args: FitArgs,
): { y: tf.Tensor; args: FitArgs; trained: tf.LayersModel; run: OutputsRun; dispose(): void } {
  const lossWeights = args.lossWeights;
  const ys = outputsOf(model, y);
  const spec = outputsSpec(model, ys, lossWeights);
  const classWeights = outputClassWeights(
    args.classWeight,
    model,
    ys,
    spec.outputs.map(o => (o.lossFunction ? 'categorical' : o.kind)), // a function's table: by y's classes
  );
  const flatY = flatTargets(ys);
  const given = args.validationData;
  const validationY = given ? flatTargets(outputsOf(model, given[1], 'fit', "validationData's y")) : undefined;
  const { lossWeights: _weights, classWeight: _classes, ...rest } = args;
  void [_weights, _classes];
  const flatArgs: FitArgs = validationY
    ? { ...rest, validationData: [given![0], validationY] as FitArgs['validationData'] }
    : rest;
  return {
    y: flatY,
    args: flatArgs,
    trained: flatOutputModel(model),
    run: {
      spec,
      ...(classWeights ? { classWeights } : {}),
      targets: outputsTargets(model),
      method: FIT_OUTPUTS_METHOD_NAME,
      plugin: new URL('./fit-outputs-plugin.js', import.meta.url).href,
    },
    dispose: () => tf.dispose([flatY, ...(validationY ? [validationY] : [])]),
  };
}

/**
 * A model of one output's targets as tfjs takes them (a Tensor, a Tensor[] of one, `{ outputName: Tensor }`), for y
 * and validationData's y: the tensors.
 */
export function oneOutput(model: tf.LayersModel, y: FitY, args: FitArgs): { y: tf.Tensor; args: FitArgs } {
  const given = args.validationData;
  const vy: unknown = given?.[1];
  const one = () => outputsOf(model, vy, 'fit', "validationData's y")[0];
  const validation =
    given && vy !== undefined && !(vy instanceof tf.Tensor)
      ? ([given[0], one(), ...given.slice(2)] as FitArgs['validationData'])
      : given;
  return { y: outputsOf(model, y)[0], args: validation === given ? args : { ...args, validationData: validation } };
}
