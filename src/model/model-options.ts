/** The model section of a train config: what is trained, and with which loss. */
import type { OptionTable } from '../options/declaration.js';
import { choice, nonEmpty } from '../options/option-checks.js';
import { TandemError } from '../errors.js';
import { LOSS_KINDS, type LossKind } from './loss-kinds.js';

export interface ModelSection {
  /** Builtin model name or path to an ES module `(tf, options) => tf.LayersModel`. Default `mlp`. */
  model?: string;
  /**
   * The loss: `categorical` (sparse categorical cross-entropy, from logits or a softmax), `binary` (one output on two
   * classes, from a sigmoid or a logit), or a regression loss (one output, float targets from a data module): `mse`,
   * `mae`, `huber` (delta 1), `logcosh`, `msle`, `mape`, `poisson`, as tfjs-layers computes each.
   * Default: the loss a saved model.json was compiled with (its trainingConfig), else read from the model's output.
   */
  loss?: LossKind;
  /**
   * A classifier's weight per class (index = class id): each sample's loss is multiplied by its class's weight before
   * the batch mean, as tfjs's `model.fit({ classWeight })`. Default: none (every sample weighs 1).
   */
  classWeight?: number[];
}

/** Finite, non-negative weights, one per class. */
function classWeights(v: unknown, field: string): number[] {
  if (!Array.isArray(v) || v.length === 0 || v.some(w => typeof w !== 'number' || !Number.isFinite(w) || w < 0))
    throw new TandemError('BAD_CONFIG', `config.${field}: expected an array of finite weights ≥ 0, one per class`);
  return v as number[];
}

export const MODEL_OPTIONS: OptionTable<ModelSection> = {
  model: {
    kind: 'string',
    group: 'model and data',
    arg: 'NAME|PATH',
    default: 'mlp',
    doc: 'mlp, alexnet-mini, alexnet, convnet-gap, resnet-mini, mobilenet-mini, an ES module, or a layers model.json',
    check: nonEmpty('must be a builtin name or a module path'),
  },
  loss: {
    kind: 'string',
    group: 'model and data',
    choices: LOSS_KINDS,
    default: "a saved model's compiled loss, else read from its output",
    doc: 'mse and after: regression, one output on float targets; huber: delta 1',
    check: choice(LOSS_KINDS),
  },
  classWeight: {
    kind: 'config',
    type: 'number[]',
    group: 'model and data',
    doc: "a classifier's weight per class id: each sample's loss times its class's weight (tfjs's classWeight)",
    check: classWeights,
  },
};
