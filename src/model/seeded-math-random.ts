/**
 * A model factory's unseeded initialisers, made a function of the run's seed.
 * tfjs's random initialisers (glorotUniform, orthogonal, randomNormal, …)
 * without a `seed` seed themselves from Math.random, so a user's factory that
 * does not pass the `seed` it is given built other weights on every run:
 * `--seed` did not repeat a run. While the factory's synchronous part runs,
 * Math.random is a generator keyed by the seed (mulberry32), then restored;
 * an async factory's initialisers after its first await draw from the real
 * Math.random (give them `seed`).
 */

/** `fn()` with Math.random replaced by a generator keyed by `seed`; restored when `fn` returns or throws. */
export function withSeededMathRandom<T>(seed: number, fn: () => T): T {
  const original = Math.random;
  let state = (Math.imul(seed | 0, 0x9e3779b1) ^ 0x5bd1e995) >>> 0;
  Math.random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296;
  };
  try {
    return fn();
  } finally {
    Math.random = original;
  }
}
