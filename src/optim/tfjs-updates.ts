/**
 * The update rules of tfjs's `rmsprop`, `adagrad`, `adamax`, `adadelta` and
 * `momentum` with Nesterov on
 * flat Float32Arrays, operation for operation as tfjs-core's optimizers run
 * them (node_modules/@tensorflow/tfjs-core/dist/optimizers/*_optimizer.js):
 * every tensor operation there is one float32 operation here (`f`, after each
 * one), and every number tfjs turns into a float32 scalar (lr, decay, 1 - rho,
 * …) is rounded to float32 first. On tfjs's cpu backend the result is the same
 * bits (test/tfjs-optimizers.test.ts). tfjs's quirks are kept on purpose,
 * since the point is to give what tfjs gives:
 * - rmsprop centered takes the square root of ms - (mg² + ε): NaN wherever the
 *   variance estimate is under ε, a parameter whose gradient is 0 included;
 * - adadelta scales the gradient by the accumulated squares *before* this
 *   step's gradient. From zero state its two accumulators then stay equal, the
 *   scale is exactly 1 and the update is p - lr × g: tfjs's adadelta is sgd.
 *
 * The native addon has no loops for these: `nativeArithmetic` runs these
 * (the same bits on every thread, whichever engine).
 */
const f = Math.fround;

/** `decay`: of the mean square (keras calls it rho); `centered`: divide by the variance, not the mean square. */
export interface RmspropConfig {
  kind: 'rmsprop';
  lr: number;
  decay: number;
  momentum: number;
  epsilon: number;
  centered: boolean;
}
/** tfjs's adagrad has no epsilon of its own: it adds the backend's (1e-7 on float32). */
export interface AdagradConfig {
  kind: 'adagrad';
  lr: number;
  initialAccumulatorValue: number;
}
/** `decay`: of the learning rate, lr / (1 + decay × iteration). */
export interface AdamaxConfig {
  kind: 'adamax';
  lr: number;
  beta1: number;
  beta2: number;
  epsilon: number;
  decay: number;
}
export interface AdadeltaConfig {
  kind: 'adadelta';
  lr: number;
  rho: number;
  epsilon: number;
}

/** sgd with momentum and Nesterov's look-ahead (`tf.train.momentum(lr, momentum, true)`). */
export interface NesterovConfig {
  lr: number;
  momentum: number;
}

/** The epsilon tfjs adds when none is given: `tf.backend().epsilon()` on a float32 backend. */
export const TFJS_EPSILON = 1e-7;

/** state: the mean square, the moment and (centered) the mean gradient. */
export function rmspropUpdate(
  config: RmspropConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
): void {
  const decay = f(config.decay),
    keep = f(1 - config.decay),
    lr = f(config.lr),
    momentum = f(config.momentum),
    eps = f(config.epsilon);
  const [ms, mom, mg] = state;
  for (let i = start; i < end; i++) {
    const g = grads[i];
    const s = f(f(ms[i] * decay) + f(f(g * g) * keep));
    let denominator: number;
    if (config.centered) {
      const mgi = f(f(mg[i] * decay) + f(g * keep));
      mg[i] = mgi;
      denominator = f(Math.sqrt(f(s - f(f(mgi * mgi) + eps)))); // tfjs: sqrt(ms - (mg² + ε))
    } else {
      denominator = f(Math.sqrt(f(s + eps)));
    }
    const m = f(f(mom[i] * momentum) + f(f(g * lr) / denominator));
    ms[i] = s;
    mom[i] = m;
    params[i] = f(params[i] - m);
  }
}

/** state: the accumulated squares (from `initialAccumulatorValue`). */
export function adagradUpdate(
  config: AdagradConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
): void {
  const minusLr = f(-config.lr),
    eps = f(TFJS_EPSILON);
  const acc = state[0];
  for (let i = start; i < end; i++) {
    const g = grads[i];
    const a = f(acc[i] + f(g * g));
    acc[i] = a;
    params[i] = f(f(f(g / f(Math.sqrt(f(a + eps)))) * minusLr) + params[i]);
  }
}

/** tfjs's `accBeta1` at `step` (from 1): float32 beta1 multiplied in step - 1 times, as its variable is. */
let accBeta1Memo = { beta1: NaN, step: 0, value: 0 };
export function adamaxAccBeta1(beta1: number, step: number): number {
  const b = f(beta1);
  let { step: k, value } = accBeta1Memo;
  if (accBeta1Memo.beta1 !== beta1 || k > step || k < 1) {
    k = 1;
    value = b;
  }
  for (; k < step; k++) value = f(value * b);
  accBeta1Memo = { beta1, step, value };
  return value;
}

/** state: m and the weighted infinity norm. tfjs's iteration counter is step - 1 (a resumed run carries the step). */
export function adamaxUpdate(
  config: AdamaxConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
  step: number,
): void {
  const b1 = f(config.beta1),
    keep1 = f(1 - config.beta1),
    b2 = f(config.beta2),
    eps = f(config.epsilon);
  const lrT = f(f(-config.lr) / f(f(f(step - 1) * f(config.decay)) + 1));
  const scale = f(lrT / f(1 - adamaxAccBeta1(config.beta1, step)));
  const [m, u] = state;
  for (let i = start; i < end; i++) {
    const g = grads[i];
    const mi = f(f(m[i] * b1) + f(g * keep1));
    const ui = Math.max(f(u[i] * b2), Math.abs(g));
    m[i] = mi;
    u[i] = ui;
    params[i] = f(f(scale * f(mi / f(ui + eps))) + params[i]);
  }
}

/** state: the accumulated squares of gradients and of updates. */
export function adadeltaUpdate(
  config: AdadeltaConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
): void {
  const rho = f(config.rho),
    keep = f(1 - config.rho),
    eps = f(config.epsilon),
    minusLr = f(-config.lr);
  const [accG, accU] = state;
  for (let i = start; i < end; i++) {
    const g = grads[i],
      ag = accG[i],
      au = accU[i];
    const update = f(f(f(Math.sqrt(f(au + eps))) / f(Math.sqrt(f(ag + eps)))) * g); // tfjs: the accumulator before this step
    accG[i] = f(f(ag * rho) + f(f(g * g) * keep));
    accU[i] = f(f(au * rho) + f(f(update * update) * keep));
    params[i] = f(f(update * minusLr) + params[i]);
  }
}

/**
 * state: the accumulation. tfjs: acc' = m·acc + g; p' = p + (−lr)·(g + m·acc'), each operation in float32.
 *
 * @example
 * nesterovUpdate({ lr: 0.1, momentum: 0.5 }, p, g, [acc], 0, p.length) // p = [1], g = [1], acc = [0]: acc 1, p 1 - 0.1 × 1.5 = 0.85
 */
export function nesterovUpdate(
  config: NesterovConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
): void {
  const m = f(config.momentum),
    c = f(-config.lr);
  const acc = state[0];
  for (let i = start; i < end; i++) {
    const g = grads[i];
    const a = f(f(m * acc[i]) + g);
    acc[i] = a;
    params[i] = f(f(c * f(g + f(a * m))) + params[i]);
  }
}

/**
 * What to add to a non-finite loss or gradient's message when the optimizer's own rule is the likely cause: tfjs's
 * centered rmsprop (above) turns a parameter NaN once its gradient's variance estimate is under ε, which a small or
 * zero gradient reaches in its first step. '' for every other optimizer.
 */
export function optimizerNaNHint(config: { kind: string; centered?: boolean }): string {
  return config.kind === 'rmsprop' && config.centered
    ? "; with rmsprop centered, the likely cause is tfjs's own rule, which tandem keeps: it takes sqrt(ms - (mg² + epsilon)), NaN for " +
        'every parameter whose gradient varies by less than epsilon (a zero gradient included), from its first update: drop --centered ' +
        '(centered: false)'
    : '';
}
