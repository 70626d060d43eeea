/**
 * `fit` across hosts, as tf.distribute's multi-worker strategy runs `model.fit`: every host calls `fit` with the same
 * model, data and arguments, and each host's devices train their share of every global batch. Before the first step
 * the hosts compare a digest of their arguments (a difference is BAD_CONFIG naming the argument and the hosts); at
 * each epoch's end they add up the epoch's batch sums and validation sums of every host, so that every host's
 * callbacks see the same, world-wide logs, and agree to stop when any host's callbacks set `model.stopTraining`.
 */
import { createHash } from 'node:crypto';
import type * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import { metricValues } from '../model/metric-values.js';
import type { HostStepShare, RunHosts } from '../trainer/run-types.js';

/** Per fit argument, its value (short) or a digest of it (`sha256:` and 16 hex digits). */
export type FitDigest = Record<string, string>;

/** Values as JSON up to this length are shown as they are in a refusal; longer ones by their digest. */
const SHOWN_CHARS = 48;

/** The digest of `args`' values: tensors by their shape and values, anything else as JSON. */
export function fitDigest(args: Record<string, unknown>): FitDigest {
  const out: FitDigest = {};
  for (const [name, value] of Object.entries(args)) {
    if (value === undefined) continue;
    const json = JSON.stringify(value, (_, v: unknown) => (isTensor(v) ? tensorDigest(v) : v)) ?? 'undefined';
    out[name] = json.length <= SHOWN_CHARS ? json : `sha256:${hashOf(json)}`;
  }
  return out;
}

function isTensor(v: unknown): v is tf.Tensor {
  return typeof v === 'object' && v !== null && typeof (v as tf.Tensor).dataSync === 'function' && 'shape' in v;
}

function tensorDigest(t: tf.Tensor): string {
  const values = t.dataSync();
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  return `tensor [${t.shape.join(', ')}] ${t.dtype} sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

function hashOf(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/**
 * Every host's digest compared with host 0's (host 0 compares every host's): BAD_CONFIG on a difference, naming each
 * differing argument, its value on both hosts, and the hosts.
 */
export async function agreeOnArgs(hosts: RunHosts, mine: FitDigest): Promise<void> {
  const all = await hosts.gather('fit-arguments', mine);
  const me = hosts.process;
  const others = me === 0 ? all.map((_, h) => h).filter(h => h !== 0) : [0];
  for (const h of others) {
    const theirs = all[h];
    const names = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])].filter(n => mine[n] !== theirs[n]);
    if (names.length === 0) continue;
    const [a, b] = me < h ? [me, h] : [h, me];
    const [va, vb] = me < h ? [mine, theirs] : [theirs, mine];
    const said = names.map(
      n => `${n}: ${va[n] ?? 'not given'} on ${hosts.describe(a)}, ${vb[n] ?? 'not given'} on ${hosts.describe(b)}`,
    );
    throw new TandemError(
      'BAD_CONFIG',
      `fit: ${hosts.describe(b)} was called with other arguments than ${hosts.describe(a)} — ${said.join('; ')}: ` +
        'every host calls fit with the same model, data and arguments (as tf.distribute’s multi-worker strategy)',
    );
  }
}

/** What a host brings to an epoch's end: its devices' share of each batch, and its part of the validation. */
export interface HostEpoch {
  shares: HostStepShare[];
  validation?: ValidationPart;
}

/** Sums over some validation samples: per `model.metricsNames`, the value times the samples; and the samples. */
export interface ValidationPart {
  sums: number[];
  samples: number;
}

/**
 * An epoch's training logs (`loss`, then `keys`) from every host's shares of its batches: each batch's world value (the
 * loss weighted by samples, a metric from the summed sums, or the summed correct over the summed samples, as one
 * engine computes it), then their mean weighted by `batchSizes`, as `model.fit` takes it.
 */
export function epochTrainLogs(
  hosts: HostStepShare[][],
  keys: string[],
  computesMetrics: boolean,
  batchSizes: number[],
): Record<string, number> {
  const totals: Record<string, number> = {};
  let seen = 0;
  for (const [b, size] of batchSizes.entries()) {
    const shares = hosts.map(h => h[b]);
    const logs = batchLogs(shares, keys, computesMetrics);
    for (const key of ['loss', ...keys]) totals[key] = (totals[key] ?? 0) + logs[key] * size;
    seen += size;
  }
  return Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, v / seen]));
}

/** A batch's `loss` and metrics over `shares` (one per host). */
export function batchLogs(shares: HostStepShare[], keys: string[], computesMetrics: boolean): Record<string, number> {
  const samples = shares.reduce((s, x) => s + x.samples, 0);
  const loss = shares.length === 1 ? shares[0].loss : shares.reduce((s, x) => s + x.loss * x.samples, 0) / samples;
  const logs: Record<string, number> = { loss };
  const sums = computesMetrics
    ? shares[0].metricSums?.map((_, i) => shares.reduce((s, x) => s + (x.metricSums?.[i] ?? 0), 0))
    : undefined;
  const values = sums && metricValues(sums);
  const accuracy = shares.reduce((s, x) => s + x.correct, 0) / samples;
  for (const [i, key] of keys.entries()) logs[key] = values?.[i] ?? accuracy;
  return logs;
}

/** `val_<name>` of every host's validation part: the sums added up, over the samples. */
export function validationLogs(parts: ValidationPart[], names: string[]): Record<string, number> {
  const n = parts.reduce((s, p) => s + p.samples, 0);
  const logs: Record<string, number> = {};
  for (const [i, name] of names.entries()) logs[`val_${name}`] = parts.reduce((s, p) => s + p.sums[i], 0) / n;
  return logs;
}
