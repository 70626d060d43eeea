/**
 * Procedural class-conditioned images: every class has a fixed random
 * "prototype" (a few oriented stripes and blobs from the seed); a sample is its
 * class prototype, randomly shifted, plus noise. Any size and class count,
 * deterministic by (seed, index), learnable but not trivially.
 */
import type { Dataset, DatasetOptions } from './dataset.js';

/** mulberry32: a small, fast, seedable PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Prototype {
  fx: number;
  fy: number;
  phase: number;
  cx: number;
  cy: number;
  radius: number;
  tint: number[];
}

export const SYNTHETIC_DEFAULTS = { size: 4096, classes: 10, imageShape: [32, 32, 3] } as const;

/**
 * Floats of generated samples each reader keeps (64 MiB): a sample costs ~60 µs to draw at 32×32×3 (a sine and a
 * random number per value), about a core's fifth for one device at bench speed, and it is the same every epoch;
 * read again, it is a copy. Beyond the cap, samples are drawn each time.
 */
export const SYNTHETIC_CACHE_FLOATS = 16 * 2 ** 20;

export function syntheticImages(options: DatasetOptions): Dataset {
  const classes = options.classes ?? SYNTHETIC_DEFAULTS.classes;
  const [h, w, c] = options.imageShape ?? SYNTHETIC_DEFAULTS.imageShape;
  const size = options.size ?? SYNTHETIC_DEFAULTS.size;
  const protos: Prototype[] = [];
  const r = prng(options.seed * 2654435761 + 17);
  for (let k = 0; k < classes; k++) {
    protos.push({
      fx: 1 + r() * 4,
      fy: 1 + r() * 4,
      phase: r() * Math.PI * 2,
      cx: r(),
      cy: r(),
      radius: 0.15 + r() * 0.25,
      tint: Array.from({ length: c }, () => 0.3 + r() * 0.7),
    });
  }
  const sampleFloats = h * w * c,
    cache = new Map<number, { values: Float32Array; label: number }>();
  let cachedFloats = 0;
  return {
    size,
    sampleShape: [h, w, c],
    classes,
    label(index) {
      return Math.floor(prng((options.seed + 1) * 1000003 + index * 7919)() * classes);
    },
    read(index, out, offset) {
      const kept = cache.get(index);
      if (kept) {
        out.set(kept.values, offset);
        return kept.label;
      }
      const label = draw(protos, options.seed, [h, w, c], index, out, offset);
      if (cachedFloats + sampleFloats <= SYNTHETIC_CACHE_FLOATS) {
        cache.set(index, { values: out.slice(offset, offset + sampleFloats), label });
        cachedFloats += sampleFloats;
      }
      return label;
    },
  };
}

/** Draws sample `index` of the images of `seed` into out at offset; returns its label. */
function draw(
  protos: Prototype[],
  seed: number,
  [h, w, c]: readonly number[],
  index: number,
  out: Float32Array,
  offset: number,
): number {
  const classes = protos.length;
  const s = prng((seed + 1) * 1000003 + index * 7919);
  const label = Math.floor(s() * classes);
  const p = protos[label];
  const dx = (s() - 0.5) * 0.2,
    dy = (s() - 0.5) * 0.2;
  let o = offset;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const u = x / w + dx,
        v = y / h + dy;
      const stripes = Math.sin((u * p.fx + v * p.fy) * Math.PI * 2 + p.phase);
      const d2 = (u - p.cx) ** 2 + (v - p.cy) ** 2;
      const blob = d2 < p.radius * p.radius ? 1 : 0;
      for (let ch = 0; ch < c; ch++) {
        out[o++] = 0.5 * p.tint[ch] * (0.5 + 0.5 * stripes) + 0.4 * blob + 0.3 * (s() - 0.5);
      }
    }
  }
  return label;
}
