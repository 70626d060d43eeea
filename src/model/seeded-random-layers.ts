/**
 * Random layers drawn deterministically: in training, every Dropout,
 * SpatialDropout1D, GaussianNoise, GaussianDropout and AlphaDropout layer of a
 * device's model, and every recurrent layer with `dropout` or
 * `recurrentDropout` (LSTM, GRU, SimpleRNN, ConvLSTM2D: their cells' masks),
 * draws from a stream keyed by (run seed, device rank, step, layer), instead
 * of tfjs's unseeded Math.random (or, with a layer `seed`, the same mask every
 * step). Layers inside wrappers (Bidirectional, TimeDistributed) and nested
 * models count. So a run, and its resume from a checkpoint, give the same
 * bits; each device draws its own masks for its own samples, as PyTorch DDP
 * does. Unlike one engine on the global batch, the masks of N devices are not
 * the ones a single engine would draw (the same distribution, other values) —
 * unless that engine draws shard by shard (`shards`, the reference's way).
 *
 * @example
 * const seeds = seedRandomLayers(tf, model);
 * seeds.at(runSeed, rank, step); // before each training forward
 */
import type { LayersModel, Tensor, Tf } from '../engine/tfjs-types.js';
import { allLayers } from './all-layers.js';
import { dropoutMask } from '../engine/dropout-mask.js';
import { dropoutMaskKernel, dropoutThreshold, maskBase, registerSeedSource } from '../engine/dropout-kernel.js';

interface RecurrentCell {
  dropout?: number;
  recurrentDropout?: number;
  dropoutFunc?: (x: Tensor, rate: number) => Tensor;
}

interface RandomLayer {
  name: string;
  rate?: number;
  stddev?: number;
  seed?: number;
  noiseShape?: number[];
  cell?: RecurrentCell;
  call(inputs: Tensor | Tensor[], kwargs: Record<string, unknown>): Tensor | Tensor[];
  /** Dropout's (and SpatialDropout1D's) noise shape for an input: null for the input's own. */
  getNoiseShape?(input: Tensor): number[] | null | undefined;
  getClassName(): string;
  layers?: RandomLayer[];
  /** A wrapper's layer (TimeDistributed, Bidirectional's forward one). */
  layer?: RandomLayer;
  forwardLayer?: RandomLayer;
  backwardLayer?: RandomLayer;
}

const RANDOM_LAYERS = new Set(['Dropout', 'SpatialDropout1D', 'GaussianNoise', 'GaussianDropout', 'AlphaDropout']);

/** Does `layer` draw at random in training? */
function drawsAtRandom(layer: RandomLayer): boolean {
  const cell = layer.cell;
  return (
    RANDOM_LAYERS.has(layer.getClassName()) ||
    (cell !== undefined && ((cell.dropout ?? 0) > 0 || (cell.recurrentDropout ?? 0) > 0))
  );
}

/** A 31-bit mix of integers (murmur3's finaliser over each), stable across engines and threads. */
export function mixSeed(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const p of parts) {
    h = Math.imul(h ^ (p | 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 1;
}

export interface RandomLayerSeeds {
  /** Names of the layers that draw seeded. */
  readonly layers: string[];
  /** Keys the next training forward's draws. */
  at(runSeed: number, rank: number, step: number): void;
}

/**
 * Makes every random layer of `model` draw from the stream the last `at` keyed. With `shards` > 1 (the
 * single-engine reference of an N-device run) a batch is drawn as N devices draw it: split into N contiguous
 * shards, shard k keyed as device rank + k — so one engine can compute what N devices compute.
 */
export function seedRandomLayers(tf: Tf, model: LayersModel, shards = 1): RandomLayerSeeds {
  let key = [0, 0, 0];
  const found = allLayers(model.layers as unknown as RandomLayer[]).filter(drawsAtRandom);
  found.forEach((layer, index) => {
    const stock = layer.call.bind(layer);
    // the seed of device k's draw of this layer in the step `at` keyed, asked when a mask kernel runs (a replayed
    // step's too: engine/kernel-trace.ts)
    const source = registerSeedSource(() => mixSeed(key[0], key[1], key[2], index));
    layer.call = (inputs, kwargs) => {
      if (kwargs?.training !== true) return stock(inputs, kwargs);
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const draw = (part: Tensor, partKwargs: Record<string, unknown>, k: number) =>
        seededCall(
          tf,
          layer,
          part,
          mixSeed(key[0], key[1] + k, key[2], index),
          () => stock(part, partKwargs) as Tensor,
          shards === 1 ? source : undefined,
        );
      return tf.tidy(() =>
        shards === 1
          ? draw(x, kwargs, 0)
          : tf.concat(
              shardsOf(tf, x, kwargs, shards).map(([part, kw], k) => draw(part, kw, k)),
              0,
            ),
      );
    };
  });
  return {
    layers: found.map(l => l.name),
    at: (runSeed, rank, step) => {
      key = [runSeed, rank, step];
    },
  };
}

/**
 * `x` and every batch-sized tensor among `kwargs` (an RNN's mask), cut into `shards` contiguous pieces along the batch.
 */
function shardsOf(
  tf: Tf,
  x: Tensor,
  kwargs: Record<string, unknown>,
  shards: number,
): [Tensor, Record<string, unknown>][] {
  const batched = (v: unknown): v is Tensor => v instanceof tf.Tensor && v.shape[0] === x.shape[0];
  const pieces = Object.fromEntries(
    Object.entries(kwargs)
      .filter(([, v]) => batched(v))
      .map(([k, v]) => [k, tf.split(v as Tensor, shards, 0)]),
  );
  return tf
    .split(x, shards, 0)
    .map((part, i) => [
      part,
      { ...kwargs, ...Object.fromEntries(Object.entries(pieces).map(([k, ps]) => [k, ps[i]])) },
    ]);
}

/** `source`: a seed source giving `seed` (engine/dropout-kernel.ts), for a mask kernel where the backend has one. */
function seededCall(tf: Tf, layer: RandomLayer, x: Tensor, seed: number, stock: () => Tensor, source?: number) {
  switch (layer.getClassName()) {
    case 'Dropout':
    case 'SpatialDropout1D': {
      // tfjs's own call (tf.dropout), its mask drawn by dropoutMultiplier
      const rate = layer.rate!;
      if (!(rate > 0 && rate < 1)) return stock();
      const shape = noiseShape(x.shape, layer.getNoiseShape?.(x));
      const kernel = source === undefined ? undefined : dropoutMaskKernel(tf, shape, rate, source);
      return tf.mul(x, kernel ?? dropoutMultiplier(tf, shape, rate, seed));
    }
    case 'GaussianNoise':
      return tf.add(x, tf.randomNormal(x.shape, 0, layer.stddev!, 'float32', seed));
    case 'GaussianDropout': {
      const rate = layer.rate!;
      if (!(rate > 0 && rate < 1)) return x;
      return tf.mul(x, tf.randomNormal(x.shape, 1, Math.sqrt(rate / (1 - rate)), 'float32', seed));
    }
    case 'AlphaDropout': {
      // as tfjs-layers computes it, with a seeded mask
      const rate = layer.rate!;
      if (!(rate > 0 && rate < 1)) return x;
      // eslint-disable-next-line no-loss-of-precision -- tfjs-layers' constants, digit for digit (the same doubles)
      const alphaP = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946;
      const kept = tf.cast(
        tf.greaterEqual(tf.randomUniform(layer.noiseShape ?? x.shape, 0, 1, 'float32', seed), rate),
        'float32',
      );
      const a = ((1 - rate) * (1 + rate * alphaP ** 2)) ** -0.5;
      const b = -a * alphaP * rate;
      return tf.add(tf.mul(tf.add(tf.mul(x, kept), tf.mul(tf.add(kept, -1), alphaP)), a), b);
    }
    default: {
      // a recurrent layer: its cell draws each mask through dropoutFunc, the n-th draw of this call keyed n
      const cell = layer.cell!;
      const own = cell.dropoutFunc;
      let n = 0;
      cell.dropoutFunc = (ones, rate) =>
        rate > 0 && rate < 1 ? tf.mul(ones, dropoutMultiplier(tf, ones.shape, rate, mixSeed(seed, n++))) : ones.clone();
      try {
        return stock();
      } finally {
        cell.dropoutFunc = own;
      }
    }
  }
}

/** tf.dropout's noise shape: the input's, with a given shape's null entries taken from it. */
function noiseShape(shape: number[], given: (number | null)[] | null | undefined): number[] {
  if (!given) return shape.slice();
  if (given.length !== shape.length) return given as number[];
  return given.map((d, i) => d ?? shape[i]);
}

/**
 * tf.dropout's multiplier of `shape` (0 where dropped, 1/keep elsewhere, as float32 computes floor(u + keep) / keep),
 * with u drawn from a counter-based stream of `seed` (murmur3's finaliser over a Weyl sequence: u = its high 24 bits
 * / 2^24) instead of tfjs's seeded alea, which took ~7 ns per value in JS (3.4 ms of a 12.5 ms mnist-node step).
 * Branch-free: u is kept from a threshold on its 24 bits, found once.
 */
export function dropoutMultiplier(tf: Tf, shape: number[], rate: number, seed: number): Tensor {
  const { kept, lo } = dropoutThreshold(rate);
  const table = Float32Array.of(0, kept); // [dropped, kept]
  const size = shape.reduce((a, b) => a * b, 1);
  return tf.tensor(dropoutMask(size, maskBase(seed), lo, table), shape, 'float32');
}
