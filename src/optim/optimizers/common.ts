/** Hyper-parameters several optimizers declare alike (each declares its own where it differs: momentum, decay). */
import { real } from '../optimizer-definition.js';

/** The epsilon tfjs adds when none is given: `tf.backend().epsilon()` on a float32 backend. */
export const TFJS_EPSILON = 1e-7;

export const EPSILON = real('added to the denominator', TFJS_EPSILON, { min: Number.MIN_VALUE, max: 1 });
export const BETA1 = real('decay of the first moment', 0.9, { min: 0, max: 1, maxOpen: true });
export const BETA2 = real('decay of the second moment', 0.999, { min: 0, max: 1, maxOpen: true });

/** Every operation in float32, as tfjs's tensors compute. */
export const f = Math.fround;
