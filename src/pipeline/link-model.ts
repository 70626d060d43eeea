/**
 * An emulated link between devices (EMULATION: on one host the exchange runs
 * through shared memory; this only holds the comm side as long as a real link
 * of this bandwidth and latency would take). A ring all-reduce puts
 * 2(N-1)/N of the buffer on the wire per rank; the comm side is held until
 * bytes/bandwidth + latency has passed since the exchange began.
 */
import { TandemError } from '../errors.js';

export interface LinkModel {
  /** Bits per second. */
  bandwidth: number;
  latencyMs: number;
  /** As the user wrote it, e.g. `1gbps`. */
  label: string;
}

const UNITS: Record<string, number> = { '': 1, k: 1e3, m: 1e6, g: 1e9, t: 1e12 };

/** Parses `1gbps`, `100mbps`, `25gbps:0.05ms` (bandwidth[:latency]). */
export function parseLink(text: string): LinkModel {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:bit\/s|bps)\s*(?::\s*(\d+(?:\.\d+)?)\s*(us|ms))?\s*$/i.exec(text);
  if (!m)
    throw new TandemError(
      'BAD_CONFIG',
      `--link '${text}': expected a bandwidth like 100mbps, 1gbps or 10gbps, optionally :latency like 1gbps:0.05ms`,
    );
  const bandwidth = Number(m[1]) * UNITS[m[2].toLowerCase()];
  if (!(bandwidth > 0)) throw new TandemError('BAD_CONFIG', `--link '${text}': bandwidth must be positive`);
  const latencyMs = m[3] === undefined ? 0 : Number(m[3]) * (m[4].toLowerCase() === 'us' ? 1e-3 : 1);
  return { bandwidth, latencyMs, label: text.trim() };
}

/** Milliseconds a ring all-reduce of `bytes` among `devices` takes on `link`. */
export function allReduceWireMs(link: LinkModel, bytes: number, devices: number): number {
  if (devices <= 1) return 0;
  const wire = ((2 * (devices - 1)) / devices) * bytes;
  return ((wire * 8) / link.bandwidth) * 1000 + link.latencyMs;
}

/** The largest stallTimeoutMs the config accepts (a day). */
const MAX_STALL_TIMEOUT_MS = 24 * 3600_000;

const holdWord = new Int32Array(new SharedArrayBuffer(4));

/** Holds this thread until `ms` after `startedAt` (performance.now()): the emulated wire time. */
export function holdUntil(startedAt: number, ms: number): void {
  for (;;) {
    const left = startedAt + ms - performance.now();
    if (left <= 0) return;
    Atomics.wait(holdWord, 0, 0, left); // nothing notifies this word: a timed hold, the emulation itself
  }
}

/**
 * Refuses, before step 1, an emulated link so slow that the stall watchdog would end the run: a step's holds (one
 * per group, or per chunk with --exchange-order priority) follow each other on the comm thread, so consecutive step
 * reports are at least their sum apart, and the main thread calls a device silent after `stallTimeoutMs`.
 * `holdFloats` is the float count of each hold.
 */
export function checkLinkHolds(
  link: LinkModel,
  devices: number,
  holdFloats: readonly number[],
  stallTimeoutMs: number,
): void {
  const step = holdFloats.reduce((sum, floats) => sum + allReduceWireMs(link, floats * 4, devices), 0);
  if (step < stallTimeoutMs) return;
  const s = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  // twice the hold: the watchdog's wait also spans the next batch's load and the step's compute, which a busy
  // machine stretches (1.25 × left a first batch stalled on a loaded 2-core machine)
  const enough = Math.ceil((step * 2) / 1000) * 1000;
  throw new TandemError(
    'BAD_CONFIG',
    `--link ${link.label} (EMULATED) would hold every step's exchange ${s(step)} ` +
      (`(${holdFloats.length} hold(s) of the model's gradients), beyond the stall watchdog (stallTimeoutMs ` +
        `${s(stallTimeoutMs)}): the run would fail as stalled. `) +
      `Give a faster link${enough <= MAX_STALL_TIMEOUT_MS ? `, or --stall-timeout-ms ${enough} or more` : ''}`,
  );
}
