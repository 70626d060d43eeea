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

/**
 * Sets a tfjs optimizer's learning rate between steps, as a tfjs user schedules it: `setLearningRate` where the
 * optimizer has one (sgd and momentum keep -lr as a tensor: assigning `learningRate` alone changes nothing), else the
 * `learningRate` field its update reads (adam, rmsprop, adagrad, adamax, adadelta).
 */
export function setTfjsLearningRate(optimizer: import('@tensorflow/tfjs').Optimizer, lr: number): void {
  const o = optimizer as unknown as { setLearningRate?: (lr: number) => void; learningRate: number };
  if (typeof o.setLearningRate === 'function') o.setLearningRate(lr);
  else o.learningRate = lr;
}
