/** A user module's model checked against the data before any thread starts: built once here, on the cpu backend. */
import { TandemError } from '../errors.js';
import { isRegressionLoss, type LossKind } from '../config-types.js';
import type { ModelSpec } from '../model/resolve-model.js';
import { useQuietCpu } from '../engine/quiet-cpu.js';
import { isImageFolder } from '../data/resolve-dataset.js';

/** `; give --image-size 32x32x1 …` where the data's images are resized to a size the model's input fixes. */
function imageSizeFix(input: (number | null)[], dataSource: string): string {
  const resized = dataSource === 'synthetic-images' || isImageFolder(dataSource);
  if (!resized || input.length !== 3 || input.some(d => d === null) || ![1, 3, 4].includes(input[2]!)) return '';
  return `; give --image-size ${input.join('x')} (config imageSize: [${input.join(', ')}]), their size`;
}

/** Builds a user module's model once on this thread (cpu backend) to check it against the data. */
export async function checkModuleModelShapes(
  spec: ModelSpec,
  sampleShape: number[],
  classes: number,
  modelSource: string,
  dataSource: string,
  loss?: LossKind,
  targetShape?: number[],
  ownTargets = false,
): Promise<void> {
  const tf = await import('#tfjs');
  const { buildModel } = await import('../model/resolve-model.js');
  const { assertTrainable } = await import('../model/trainability.js');
  await useQuietCpu(tf);
  const model = await buildModel(tf, spec);
  try {
    if (model.inputs.length !== 1 || model.outputs.length !== 1) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' has ${model.inputs.length} inputs and ${model.outputs.length} outputs; tandem trains ` +
          ("models with one input (the data's sample) and one output (the loss's). Concatenate inputs in the data " +
            'module, or train each output as its own model'),
      );
    }
    const input = model.inputs[0].shape.slice(1);
    const output = model.outputs[0].shape.slice(1);
    const fits = input.length === sampleShape.length && input.every((d, i) => d === null || d === sampleShape[i]);
    if (!fits) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' takes inputs of shape [${input.join(', ')}] but data '${dataSource}' gives ` +
          `[${sampleShape.join(', ')}]${imageSizeFix(input, dataSource)}`,
      );
    }
    if (targetShape) {
      if (!ownTargets) checkTargetShape(output, targetShape, loss, modelSource, dataSource);
      assertTrainable(tf, model, sampleShape, `model '${modelSource}'`);
      return;
    }
    const binary = classes === 2 && output[0] === 1; // one score (sigmoid or logit) for two classes
    if (isRegressionLoss(loss) && (output.length !== 1 || output[0] !== 1)) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' outputs shape [${output.join(', ')}]; loss ${loss} trains one output against one ` +
          `float target per sample`,
      );
    }
    if (!isRegressionLoss(loss) && (output.length !== 1 || (output[0] !== classes && !binary))) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' outputs shape [${output.join(', ')}] but data '${dataSource}' has ${classes} classes ` +
          `(give ${classes} outputs${classes === 2 ? ', or 1 for binary cross-entropy' : ''})`,
      );
    }
    assertTrainable(tf, model, sampleShape, `model '${modelSource}'`);
  } finally {
    model.dispose();
  }
}

/**
 * Targets of a shape against the model's output: the same shape, or (categorical cross-entropy on class ids, as
 * tfjs's sparseCategoricalCrossentropy) the output's shape without its last axis, or with it of size 1.
 */
function checkTargetShape(
  output: (number | null)[],
  target: number[],
  loss: LossKind | undefined,
  modelSource: string,
  dataSource: string,
): void {
  const same = (a: (number | null)[], b: number[]) =>
    a.length === b.length && a.every((d, i) => d === null || d === b[i]);
  const sparse =
    loss === 'categorical' && (same(output.slice(0, -1), target) || same([...output.slice(0, -1), 1], target));
  if (same(output, target) || sparse) return;
  throw new TandemError(
    'SHAPE_MISMATCH',
    `model '${modelSource}' outputs shape [${output.join(', ')}] but data '${dataSource}' gives targets of shape ` +
      `[${target.join(', ')}]; give targets of the output's shape` +
      (loss === 'categorical' ? ' (or, of class ids, its shape without the last axis)' : ''),
  );
}
