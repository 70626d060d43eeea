/**
 * A device's own classifier head (method B): output size = the number of
 * labels the device owns. `linear` (embedding · W + b) or `cosine`
 * (s · cos θ between the normalised embedding and normalised class centres,
 * with an optional additive angular margin m on the target class, as
 * face-recognition heads use: s · cos(θ_y + m)). Its parameters live only on
 * this device's compute thread and are updated there, with the same flat
 * optimizer as the shared parameters; they never enter a collective.
 */
import type { Tf, Tensor, Variable } from '../engine/tfjs-types.js';
import { fillInitialOptimizerState, optimizerStateSlots, type OptimizerConfig } from '../optim/flat-optimizer.js';
import { JS_ARITHMETIC, type FlatArithmetic } from '../optim/flat-arithmetic.js';
import { prng } from '../data/synthetic-images.js';

/**
 * Initial weights of class `label`'s centre: Glorot-uniform over (embedding, totalClasses), drawn from a
 * stream keyed by (seed, label) — the same whichever device owns the class, so a head's start does
 * not depend on the partition (N devices start exactly where one device would).
 */
export function initialCentre(seed: number, label: number, embedding: number, totalClasses: number): Float32Array {
  const limit = Math.sqrt(6 / (embedding + totalClasses));
  const r = prng(seed * 2246822519 + label * 3266489917 + 374761393);
  return Float32Array.from({ length: embedding }, () => (r() * 2 - 1) * limit);
}

/** W [embedding, labels.length] with column j = initialCentre(labels[j]). */
export function initialHeadWeights(
  seed: number,
  labels: ArrayLike<number>,
  embedding: number,
  totalClasses: number,
): Float32Array {
  const n = labels.length;
  const w = new Float32Array(embedding * n);
  for (let j = 0; j < n; j++) {
    const c = initialCentre(seed, labels[j], embedding, totalClasses);
    for (let e = 0; e < embedding; e++) w[e * n + j] = c[e];
  }
  return w;
}

export const HEAD_KINDS = ['linear', 'cosine'] as const;
export type HeadKind = (typeof HEAD_KINDS)[number];

export interface HeadConfig {
  kind: HeadKind;
  embedding: number;
  /** This device's labels (global), in local order. */
  labels: Int32Array;
  totalClasses: number;
  /** cosine: scale s and additive angular margin m (radians). */
  scale: number;
  margin: number;
  seed: number;
}

export class ClassifierHead {
  readonly vars: Variable[];
  private readonly flat: Float32Array[];
  private readonly state: Float32Array[][];

  /**
   * `synchronousReads` false (webgpu): the engine uploads a tensor later, from the array it was given, so every
   * upload gets a copy of the host values (which the next update overwrites); nothing is ever read back.
   */
  constructor(
    private readonly tf: Tf,
    readonly config: HeadConfig,
    private readonly optimizer: OptimizerConfig,
    private readonly arithmetic: FlatArithmetic = JS_ARITHMETIC,
    private readonly synchronousReads = true,
  ) {
    const { embedding, seed, labels } = config;
    const classes = labels.length;
    // The host copy holds the initial values themselves (what a read of the variables would give, bit for bit).
    this.flat = [initialHeadWeights(seed, labels, embedding, config.totalClasses)];
    if (config.kind === 'linear') this.flat.push(new Float32Array(classes));
    const w = this.upload(0, [embedding, classes]);
    this.vars = [tf.variable(w, true, `head_w_${seed}_${labels[0]}`)];
    w.dispose();
    if (config.kind === 'linear') this.vars.push(tf.variable(tf.zeros([classes]), true, `head_b_${seed}_${labels[0]}`));
    const slots = optimizerStateSlots(optimizer);
    this.state = this.flat.map(f => Array.from({ length: slots }, () => new Float32Array(f.length)));
    this.state.forEach(s => fillInitialOptimizerState(optimizer, s));
  }

  /** Logits over this device's labels; `targets` (local labels) apply the margin of a cosine head. */
  logits(embedding: Tensor, targets?: Tensor): Tensor {
    const tf = this.tf;
    const [w, b] = this.vars;
    if (this.config.kind === 'linear') return tf.add(tf.matMul(embedding, w), b);
    const cos = tf.matMul(
      tf.div(embedding, tf.add(tf.norm(embedding, 'euclidean', 1, true), 1e-12)),
      tf.div(w, tf.add(tf.norm(w, 'euclidean', 0, true), 1e-12)),
    );
    const { scale, margin } = this.config;
    if (!targets || margin === 0) return tf.mul(cos, scale);
    const oneHot = tf.oneHot(targets as import('@tensorflow/tfjs').Tensor1D, this.config.labels.length);
    const cosT = tf.sum(tf.mul(cos, oneHot), 1, true);
    const sinT = tf.sqrt(tf.clipByValue(tf.sub(1, tf.square(cosT)), 1e-7, 1));
    const cosTM = tf.sub(tf.mul(cosT, Math.cos(margin)), tf.mul(sinT, Math.sin(margin)));
    return tf.mul(tf.add(cos, tf.mul(oneHot, tf.sub(cosTM, cosT))), scale);
  }

  /** Applies one optimizer step from gradients (same order as `vars`) and writes the new values into the variables. */
  update(grads: Float32Array[], step: number): void {
    this.flat.forEach((f, i) => {
      this.arithmetic.applyUpdate(this.optimizer, f, grads[i], this.state[i], 0, f.length, step);
      const t = this.upload(i, this.vars[i].shape);
      this.vars[i].assign(t);
      t.dispose();
    });
  }

  /** Current values: W [embedding, classes] and, for linear, b [classes]. */
  values(): { w: Float32Array; b?: Float32Array } {
    return { w: this.flat[0].slice(), b: this.flat[1]?.slice() };
  }

  /** Parameters and optimizer state, for a checkpoint. */
  snapshot(): { w: Float32Array; b?: Float32Array; state: Float32Array[][] } {
    return { w: this.flat[0].slice(), b: this.flat[1]?.slice(), state: this.state.map(s => s.map(v => v.slice())) };
  }

  /** Back to a checkpoint's parameters and optimizer state. */
  restore(h: { w: Float32Array; b?: Float32Array; state: Float32Array[][] }): void {
    const values = [h.w, h.b].slice(0, this.flat.length) as Float32Array[];
    values.forEach((v, i) => {
      if (v.length !== this.flat[i].length)
        throw new Error(`head variable ${i} has ${this.flat[i].length} values, the checkpoint ${v.length}`);
      this.flat[i].set(v);
      const t = this.upload(i, this.vars[i].shape);
      this.vars[i].assign(t);
      t.dispose();
      h.state[i].forEach((st, j) => this.state[i][j].set(st));
    });
  }

  /** A tensor of host variable `i`'s values (a copy of them where the engine uploads later). */
  private upload(i: number, shape: number[]): Tensor {
    return this.tf.tensor(this.synchronousReads ? this.flat[i] : this.flat[i].slice(), shape);
  }

  get bytes(): number {
    return this.flat.reduce((s, f) => s + f.byteLength, 0);
  }

  dispose(): void {
    this.tf.dispose(this.vars);
  }
}
