/**
 * The PowerSGD hook (Vogels et al. 2019; DDP's powerSGD_hook with
 * PowerSGDState(matrix_approximation_rank, start_powerSGD_iter,
 * use_error_feedback, warm_start)). Each variable of the group with a matrix
 * shape — [rows, cols] = [product of all but the last dimension, last
 * dimension]: a dense kernel as is, a conv kernel [kh·kw·in, out] — large
 * enough that rows·cols > minCompressionRate·(rows + cols)·r is sent as a
 * rank-r approximation: P = M Q, all-reduce mean of P, orthonormalise P's
 * columns, Q = Mᵀ P, all-reduce mean of Q, M ≈ P Qᵀ. The rest (biases, small
 * tensors) is all-reduced uncompressed. With error feedback each rank keeps
 * M − P Qᵀ and adds it to the next step's M; with warm start Q carries over
 * between steps (orthonormalised before use: the same span, better
 * conditioned in float32); the first Q is drawn from the run's seed, the same
 * on every rank. Before `startStep` the group is all-reduced uncompressed.
 */
import type { Collective } from '../../collectives/collective.js';
import type { BucketInfo, CommHook, CommHookOptions, GradBucket } from '../comm-hook.js';
import {
  mixSeed,
  multiply,
  multiplyByTransposed,
  multiplyTransposed,
  orthonormalizeColumns,
  seededNormals,
} from './low-rank.js';

interface Compressed {
  /** Float offset of the matrix in the group; its shape and rank. */
  offset: number;
  rows: number;
  cols: number;
  rank: number;
  p: Float32Array;
  q: Float32Array;
  /** P with orthonormal columns, in float64 (computed alike on every rank from the same all-reduced P). */
  pHat: Float64Array;
  /** Error feedback: M − P Qᵀ of the last step (per rank). */
  residual?: Float32Array;
}

export interface PowerSgdState {
  readonly matrices: Compressed[];
  /** Variables sent uncompressed: ranges of the group, and their packed copy. */
  readonly plain: { offset: number; size: number }[];
  readonly plainBuffer: Float32Array;
  readonly pAll: Float32Array;
  readonly qAll: Float32Array;
  readonly warmStart: boolean;
  readonly startStep: number;
  readonly seed: number;
  readonly group: number;
  /**
   * [1] once Q has been drawn (warm start keeps it from then on), else [0]: an array, so that a checkpoint carries it.
   */
  readonly started: Float32Array;
}

export const POWER_SGD_HOOK: CommHook<PowerSgdState> = {
  name: 'powersgd',
  description:
    'PowerSGD: large matrices sent as a rank-r approximation P Qᵀ (error feedback, warm start); the rest all-reduced',
  init: initPowerSgd,
  exchange: exchangePowerSgd,
  // Q (all-reduced: the same on every rank) and this rank's residuals; P is recomputed every step.
  stateArrays: state => [state.started, state.qAll, ...state.matrices.flatMap(m => (m.residual ? [m.residual] : []))],
};

/** Which variables are compressed: a matrix shape and enough elements for rank r to pay. */
export function compressibleShape(
  shape: readonly number[],
  rank: number,
  minCompressionRate: number,
): { rows: number; cols: number; rank: number } | undefined {
  if (shape.length < 2) return undefined;
  const cols = shape[shape.length - 1],
    rows = shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const r = Math.min(rank, rows, cols);
  return rows * cols > minCompressionRate * (rows + cols) * r ? { rows, cols, rank: r } : undefined;
}

function initPowerSgd(info: BucketInfo, options: CommHookOptions): PowerSgdState {
  const found: Omit<Compressed, 'p' | 'q' | 'pHat'>[] = [];
  for (const v of info.variables) {
    const m = compressibleShape(v.shape, options.rank, options.minCompressionRate);
    if (m)
      found.push({ offset: v.offset, ...m, residual: options.errorFeedback ? new Float32Array(v.size) : undefined });
  }
  // Everything else of the group (small variables, a piece of one cut by a custom strategy) goes uncompressed.
  const plain: { offset: number; size: number }[] = [];
  let at = 0;
  for (const m of [...found, { offset: info.length, rows: 0, cols: 0 }]) {
    if (m.offset > at) plain.push({ offset: at, size: m.offset - at });
    at = m.offset + m.rows * m.cols;
  }
  const pAll = new Float32Array(found.reduce((n, m) => n + m.rows * m.rank, 0));
  const qAll = new Float32Array(found.reduce((n, m) => n + m.cols * m.rank, 0));
  let pAt = 0,
    qAt = 0;
  const matrices = found.map(m => {
    const p = pAll.subarray(pAt, (pAt += m.rows * m.rank)),
      q = qAll.subarray(qAt, (qAt += m.cols * m.rank));
    return { ...m, p, q, pHat: new Float64Array(m.rows * m.rank) };
  });
  return {
    matrices,
    plain,
    plainBuffer: new Float32Array(plain.reduce((n, v) => n + v.size, 0)),
    pAll,
    qAll,
    warmStart: options.warmStart,
    startStep: options.startStep,
    seed: info.seed,
    group: info.group,
    started: new Float32Array(1),
  };
}

async function exchangePowerSgd(bucket: GradBucket, state: PowerSgdState, collective: Collective): Promise<void> {
  const { buffer } = bucket;
  if (bucket.step < state.startStep || state.matrices.length === 0) {
    await collective.allReduce(buffer, 0, buffer.length, 'mean');
    return;
  }
  await allReducePlain(buffer, state, collective);
  if (state.started[0] === 0 || !state.warmStart) drawQ(state, bucket.step);
  state.started[0] = 1;
  for (const m of state.matrices) {
    const mat = buffer.subarray(m.offset, m.offset + m.rows * m.cols);
    if (m.residual)
      for (let i = 0; i < mat.length; i++) {
        mat[i] += m.residual[i];
        m.residual[i] = mat[i];
      } // residual holds M until the end
    orthonormalizeColumns(m.q, m.cols, m.rank); // the same span as last step's Q, well conditioned in float32
    multiply(mat, m.q, m.p, m.rows, m.cols, m.rank);
  }
  await collective.allReduce(state.pAll, 0, state.pAll.length, 'mean');
  for (const m of state.matrices) {
    m.pHat.set(m.p);
    orthonormalizeColumns(m.pHat, m.rows, m.rank);
    multiplyTransposed(buffer.subarray(m.offset, m.offset + m.rows * m.cols), m.pHat, m.q, m.rows, m.cols, m.rank);
  }
  await collective.allReduce(state.qAll, 0, state.qAll.length, 'mean');
  for (const m of state.matrices) {
    const mat = buffer.subarray(m.offset, m.offset + m.rows * m.cols);
    multiplyByTransposed(m.pHat, m.q, mat, m.rows, m.cols, m.rank);
    if (m.residual)
      for (let i = 0; i < mat.length; i++) {
        const left = m.residual[i] - mat[i];
        m.residual[i] = Number.isFinite(left) ? left : 0;
      }
  }
}

/** The uncompressed variables, packed, all-reduced (mean) and put back. */
async function allReducePlain(buffer: Float32Array, state: PowerSgdState, collective: Collective): Promise<void> {
  if (state.plainBuffer.length === 0) return;
  let at = 0;
  for (const v of state.plain) {
    state.plainBuffer.set(buffer.subarray(v.offset, v.offset + v.size), at);
    at += v.size;
  }
  await collective.allReduce(state.plainBuffer, 0, state.plainBuffer.length, 'mean');
  at = 0;
  for (const v of state.plain) {
    buffer.set(state.plainBuffer.subarray(at, at + v.size), v.offset);
    at += v.size;
  }
}

/** Q from the run's seed (the same on every rank): once with warm start, else every step. */
function drawQ(state: PowerSgdState, step: number): void {
  state.matrices.forEach((m, i) => {
    seededNormals(mixSeed(state.seed, state.group, i, state.warmStart ? 0 : step), m.q);
  });
}
