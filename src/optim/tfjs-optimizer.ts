/**
 * The tfjs optimizer an `OptimizerConfig` stands for: what the single-engine
 * reference (and a test) trains with, to compare the flat updates against.
 */
import type { Tf } from '../engine/tfjs-types.js';
import type { OptimizerConfig } from './flat-optimizer.js';
import { optimizerOfKind } from './optimizer-registry.js';

/** `tf.train.sgd`/`momentum`/`adam`/`rmsprop`/`adagrad`/`adamax`/`adadelta` with the config's hyper-parameters. */
export function tfjsOptimizer(tf: Tf, o: OptimizerConfig): import('@tensorflow/tfjs').Optimizer {
  return optimizerOfKind(o.kind).tfjs(tf, o as never);
}
