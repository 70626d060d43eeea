/**
 * Random layers drawn deterministically: in training, every Dropout,
 * SpatialDropout1D, GaussianNoise, GaussianDropout and AlphaDropout layer of a
 * device's model draws from a stream keyed by (run seed, device rank, step,
 * layer), instead of tfjs's unseeded Math.random (or, with a layer `seed`,
 * the same mask every step). So a run, and its resume from a checkpoint, give
 * the same bits; each device draws its own masks for its own samples, as
 * PyTorch DDP does. Unlike one engine on the global batch, the masks of N
 * devices are not the ones a single engine would draw (the same distribution,
 * other values).
 *
 * @example
 * const seeds = seedRandomLayers(tf, model);
 * seeds.at(runSeed, rank, step); // before each training forward
 */
import type { LayersModel, Tensor, Tf } from '../engine/tfjs-types.js';

interface RandomLayer {
  name: string;
  rate?: number;
  stddev?: number;
  seed?: number;
  noiseShape?: number[];
  call(inputs: Tensor | Tensor[], kwargs: Record<string, unknown>): Tensor | Tensor[];
  getClassName(): string;
  layers?: RandomLayer[];
}

const RANDOM_LAYERS = new Set(['Dropout', 'SpatialDropout1D', 'GaussianNoise', 'GaussianDropout', 'AlphaDropout']);

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

/** Makes every random layer of `model` draw from the stream the last `at` keyed. */
export function seedRandomLayers(tf: Tf, model: LayersModel): RandomLayerSeeds {
  let key = [0, 0, 0];
  const found: RandomLayer[] = [];
  const visit = (layer: RandomLayer) => {
    for (const inner of layer.layers ?? []) visit(inner);
    if (RANDOM_LAYERS.has(layer.getClassName())) found.push(layer);
  };
  for (const layer of model.layers as unknown as RandomLayer[]) visit(layer);
  found.forEach((layer, index) => {
    const stock = layer.call.bind(layer);
    layer.call = (inputs, kwargs) => {
      if (kwargs?.training !== true) return stock(inputs, kwargs);
      const seed = mixSeed(key[0], key[1], key[2], index);
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      return tf.tidy(() => seededCall(tf, layer, x, seed, () => stock(inputs, kwargs) as Tensor));
    };
  });
  return { layers: found.map(l => l.name), at: (runSeed, rank, step) => { key = [runSeed, rank, step]; } };
}

function seededCall(tf: Tf, layer: RandomLayer, x: Tensor, seed: number, stock: () => Tensor): Tensor {
  switch (layer.getClassName()) {
    case 'Dropout':
    case 'SpatialDropout1D': { // tfjs's own call, with this draw's seed
      const own = layer.seed;
      layer.seed = seed;
      try { return stock(); } finally { layer.seed = own; }
    }
    case 'GaussianNoise':
      return tf.add(x, tf.randomNormal(x.shape, 0, layer.stddev!, 'float32', seed));
    case 'GaussianDropout': {
      const rate = layer.rate!;
      if (!(rate > 0 && rate < 1)) return x;
      return tf.mul(x, tf.randomNormal(x.shape, 1, Math.sqrt(rate / (1 - rate)), 'float32', seed));
    }
    case 'AlphaDropout': { // as tfjs-layers computes it, with a seeded mask
      const rate = layer.rate!;
      if (!(rate > 0 && rate < 1)) return x;
      const alphaP = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946;
      const kept = tf.cast(tf.greaterEqual(tf.randomUniform(layer.noiseShape ?? x.shape, 0, 1, 'float32', seed), rate), 'float32');
      const a = ((1 - rate) * (1 + rate * alphaP ** 2)) ** -0.5;
      const b = -a * alphaP * rate;
      return tf.add(tf.mul(tf.add(tf.mul(x, kept), tf.mul(tf.add(kept, -1), alphaP)), a), b);
    }
    default:
      return stock();
  }
}
