/** The built-in optimizers, in the order `--help` lists them: every one tfjs's `tf.train` offers. */
import { adadelta } from './adadelta.js';
import { adagrad } from './adagrad.js';
import { adam } from './adam.js';
import { adamax } from './adamax.js';
import { rmsprop } from './rmsprop.js';
import { momentum, sgd } from './sgd.js';

export const BUILTIN_OPTIMIZERS = [sgd, momentum, adam, rmsprop, adagrad, adamax, adadelta] as const;
