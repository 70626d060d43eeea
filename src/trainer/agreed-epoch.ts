/**
 * The epoch the hosts of a streamed data module agree on, from every host's batches (agree-streamed-epoch.ts): as
 * many batches as the shortest host's, each global batch no larger than every host can give.
 */
import { shardRange } from '../data/sampler.js';

/** Each host's batches of the agreed epoch, and the global batches they make. */
export interface Agreed {
  sizes: number[][];
  globalSizes: number[];
}

/**
 * `all`: every host's batches of an epoch. Whole global batches (`shares` false): each batch the smallest any host
 * gives. Shares: a batch whose shares are `shardRange`'s of their sum is that global batch; else every host gives the
 * smallest share, and the global batch is hosts × that.
 */
export function agreedEpoch(all: number[][], shares: boolean): Agreed {
  const hosts = all.length;
  const batches = Math.min(...all.map(sizes => sizes.length));
  const sizes = all.map(() => new Array<number>(batches));
  const globalSizes = new Array<number>(batches);
  for (let b = 0; b < batches; b++) {
    const counts = all.map(s => s[b]);
    const smallest = Math.min(...counts);
    const sum = counts.reduce((a, c) => a + c, 0);
    const fits = shares && counts.every((c, h) => c === shardRange(sum, hosts, h)[1]);
    globalSizes[b] = !shares ? smallest : fits ? sum : smallest * hosts;
    for (let h = 0; h < hosts; h++) sizes[h][b] = shares && fits ? counts[h] : smallest;
  }
  return { sizes, globalSizes };
}

/**
 * `data: host 1's dataset ends after 5 batches an epoch (36 samples), host 0's after 6 (44 samples): …`: the short host
 * (fewest batches, then fewest samples) and every host whose batches differ from its.
 */
export function unevenWarning(all: number[][], batches: number): string {
  const samples = (sizes: number[]) => sizes.reduce((a, b) => a + b, 0);
  const hosts = all.map((_, h) => h);
  const short = hosts
    .filter(h => all[h].length === batches)
    .reduce((a, h) => (samples(all[h]) < samples(all[a]) ? h : a));
  const differs = (h: number) => h !== short && all[h].join() !== all[short].join();
  const others = hosts.filter(differs).map(h => `host ${h}'s after ${all[h].length} (${samples(all[h])} samples)`);
  const n = `${batches} batch${batches === 1 ? '' : 'es'}`;
  return (
    `data: host ${short}'s dataset ends after ${n} an epoch (${samples(all[short])} samples), ` +
    `${others.join(', ')}: every host ends each epoch after ${n}, and the rest of a longer host's pass is not ` +
    `trained (give every host as many batches to train them all)`
  );
}
