/**
 * The tfjs optimizer an `OptimizerConfig` stands for: what the single-engine
 * reference (and a test) trains with, to compare the flat updates against.
 */
import type { Tf } from '../engine/tfjs-types.js';
import type { OptimizerConfig } from './flat-optimizer.js';

/** `tf.train.sgd`/`momentum`/`adam`/`rmsprop`/`adagrad`/`adamax`/`adadelta` with the config's hyper-parameters. */
export function tfjsOptimizer(tf: Tf, o: OptimizerConfig): import('@tensorflow/tfjs').Optimizer {
  switch (o.kind) {
    case 'sgd':
      return o.momentum > 0 ? tf.train.momentum(o.lr, o.momentum, o.nesterov === true) : tf.train.sgd(o.lr);
    case 'adam':
      return tf.train.adam(o.lr, o.beta1, o.beta2, o.epsilon);
    case 'rmsprop':
      return tf.train.rmsprop(o.lr, o.decay, o.momentum, o.epsilon, o.centered);
    case 'adagrad':
      return tf.train.adagrad(o.lr, o.initialAccumulatorValue);
    case 'adamax':
      return tf.train.adamax(o.lr, o.beta1, o.beta2, o.epsilon, o.decay);
    case 'adadelta':
      return tf.train.adadelta(o.lr, o.rho, o.epsilon);
    default: {
      const never: never = o;
      throw new Error(`unknown optimizer ${String(never)}`);
    }
  }
}
