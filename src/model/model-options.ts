/** The model section of a train config: what is trained, and with which loss. */
import type { OptionTable } from '../options/declaration.js';
import { choice, nonEmpty } from '../options/option-checks.js';
import { TandemError } from '../errors.js';
import { LOSS_KINDS, type LossKind } from './loss-kinds.js';
import { METRIC_FUNCTIONS } from './metric-values.js';

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
  /**
   * tfjs metrics computed at every step, by the name of tfjs's function (`binaryAccuracy`, `meanSquaredError`,
   * `precision`, …: METRIC_FUNCTIONS), on targets of a shape (a dataset's `targetShape`): each step's value is the
   * global batch's, as tfjs's `model.fit` computes it. `fit` sets them from the model's compiled metrics.
   */
  metrics?: string[];
}

/** Finite, non-negative weights, one per class. */
function classWeights(v: unknown, field: string): number[] {
  if (!Array.isArray(v) || v.length === 0 || v.some(w => typeof w !== 'number' || !Number.isFinite(w) || w < 0))
    throw new TandemError('BAD_CONFIG', `config.${field}: expected an array of finite weights ≥ 0, one per class`);
  return v as number[];
}

/** Names of the metric functions tandem computes. */
function metricNames(v: unknown, field: string): string[] {
  if (!Array.isArray(v) || v.some(m => typeof m !== 'string' || !METRIC_FUNCTIONS.includes(m)))
    throw new TandemError(
      'BAD_CONFIG',
      `config.${field}: expected a list of tfjs metric function names, of ${METRIC_FUNCTIONS.join(', ')}`,
    );
  return v as string[];
}

export const MODEL_OPTIONS: OptionTable<ModelSection> = {
  model: {
    kind: 'string',
    group: 'model and data',
    hosts: 'own: a path may differ between machines; the model each host builds is compared',
    arg: 'NAME|PATH',
    default: 'mlp',
    doc: 'mlp, alexnet-mini, alexnet, convnet-gap, resnet-mini, mobilenet-mini, an ES module, or a layers model.json',
    check: nonEmpty('must be a builtin name or a module path'),
  },
  loss: {
    kind: 'string',
    group: 'model and data',
    hosts: 'same',
    choices: LOSS_KINDS,
    default: "a saved model's compiled loss, else read from its output",
    doc: 'mse and after: regression, one output on float targets; huber: delta 1',
    check: choice(LOSS_KINDS),
  },
  classWeight: {
    kind: 'config',
    type: 'number[]',
    group: 'model and data',
    hosts: 'same',
    doc: "a classifier's weight per class id: each sample's loss times its class's weight (tfjs's classWeight)",
    check: classWeights,
  },
  metrics: {
    kind: 'config',
    type: 'string[]',
    group: 'model and data',
    hosts: 'same',
    doc: "tfjs metric functions computed each step on targets of a shape (fit sets them from compile's metrics)",
    check: metricNames,
  },
};
