/**
 * What hosts in lockstep lose to each other's noise. Each host's step varies
 * from step to step (cores shared with other work, caches, the OS); every
 * all-reduce needs every host, so a step of the world lasts as long as its
 * slowest host's: for `hosts` hosts whose step times are independent with
 * spread (standard deviation) σ, the step lasts E[max of `hosts` draws] =
 * mean + e(hosts)·σ, where e(n) is the expected maximum of n standard
 * normal draws (e(1) = 0, e(2) = 1/√π ≈ 0.564, e(3) ≈ 0.846, e(4) ≈ 1.029).
 * Within one host the calibration trial already runs the devices in lockstep;
 * across hosts the schedule model (schedule-model.ts) adds this, with σ from
 * the calibration trial's steady steps (profile-model.ts), measured while
 * every host runs its own trial at once (HostChannel.meet).
 *
 * @example
 * lockstepMs(4.0, 2) // 2.26: two hosts whose steps spread by 4 ms wait 2.26 ms a step for the slower one
 */

/** e(n): the expected maximum of `n` independent standard normal draws (numerical integration; 0 for n ≤ 1). */
export function expectedMaxOfNormals(n: number): number {
  if (!Number.isInteger(n) || n < 1)
    throw new RangeError(`expectedMaxOfNormals: n must be a positive integer, got ${n}`);
  if (n === 1) return 0;
  // E[max] = ∫ x · n φ(x) Φ(x)^(n-1) dx, by Simpson's rule over [-10, 10] (the tails beyond hold < 1e-20).
  const steps = 4000,
    a = -10,
    h = 20 / steps;
  let sum = 0;
  for (let i = 0; i <= steps; i++) {
    const x = a + i * h;
    const weight = i === 0 || i === steps ? 1 : i % 2 === 1 ? 4 : 2;
    sum += weight * x * n * normalPdf(x) * normalCdf(x) ** (n - 1);
  }
  return (sum * h) / 3;
}

/** The ms a step of `hosts` hosts in lockstep waits for the slowest, each host's steps spread by `spreadMs` (σ). */
export function lockstepMs(spreadMs: number, hosts: number): number {
  return spreadMs > 0 ? expectedMaxOfNormals(hosts) * spreadMs : 0;
}

/** The sample standard deviation of `values` (n−1); undefined for fewer than 2. */
export function spreadOf(values: readonly number[]): number | undefined {
  if (values.length < 2) return undefined;
  const mean = values.reduce((s, v) => s + v, 0) / values.length;
  return Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / (values.length - 1));
}

function normalPdf(x: number): number {
  return Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI);
}

/** Φ(x), the standard normal CDF, through erfc. */
function normalCdf(x: number): number {
  return 0.5 * erfc(-x / Math.SQRT2);
}

/** erfc(x), |error| < 1.2e-7 everywhere (Numerical Recipes' erfcc, Chebyshev fit). */
function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}
