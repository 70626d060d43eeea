/**
 * The link as the cost model sees it: an all-reduce of `bytes` among the
 * ranks across it takes α + β·wire, wire = 2(N-1)/N·bytes (what a ring or
 * tandem's reduce-scatter + all-gather puts on the wire per rank). `fitLink`
 * recovers α and β from timed all-reduces of several sizes (least squares on
 * the medians), and in the same form the process CPU an all-reduce costs
 * (cpu α + cpu β·wire: the comm thread, Gloo's threads), where the samples
 * carry it; `linkOfModel` turns an emulated `--link` into the same form.
 */
import { TandemError } from '../errors.js';
import type { LinkModel } from '../pipeline/link-model.js';

export interface LinkCost {
  /** Fixed cost of one collective (latency, synchronisation), ms. */
  alphaMs: number;
  /** ms per byte on the wire per rank. */
  msPerWireByte: number;
  /** Ranks across the link (hosts; an emulated link: devices). */
  ranks: number;
  /** How it was obtained, for the report. */
  source: 'measured' | 'emulated';
  /**
   * measured: process CPU (all threads) of one collective, fixed part, ms; undefined: not measured (an emulated link
   * holds, it does not compute).
   */
  cpuAlphaMs?: number;
  /** measured: process CPU ms per byte on the wire per rank. */
  cpuMsPerWireByte?: number;
  /** measured: the medians the fit used. */
  samples?: LinkSample[];
}

/**
 * One size's agreed median time; `cpuMs`: the process CPU of one all-reduce of it (mean over the repeats and hosts).
 */
export interface LinkSample {
  bytes: number;
  ms: number;
  cpuMs?: number;
}

/** Bytes each rank sends in an all-reduce of `bytes` among `ranks`. */
export function allReduceWireBytes(bytes: number, ranks: number): number {
  return ranks <= 1 ? 0 : ((2 * (ranks - 1)) / ranks) * bytes;
}

/** ms of an all-reduce of `bytes` (float32 buffer bytes) over the link. */
export function allReduceLinkMs(link: LinkCost, bytes: number): number {
  return link.ranks <= 1 ? 0 : link.alphaMs + link.msPerWireByte * allReduceWireBytes(bytes, link.ranks);
}

/** ms of an all-gather in which each rank contributes `bytesPerRank` (each rank sends its part to the N-1 others). */
export function allGatherLinkMs(link: LinkCost, bytesPerRank: number): number {
  return link.ranks <= 1 ? 0 : link.alphaMs + link.msPerWireByte * (link.ranks - 1) * bytesPerRank;
}

/** Process CPU ms of one message of `wireBytes` on the wire per rank over `link` (0 where its CPU was not measured). */
export function linkCpuMs(link: LinkCost, wireBytes: number): number {
  return link.ranks <= 1 || link.cpuAlphaMs === undefined
    ? 0
    : link.cpuAlphaMs + (link.cpuMsPerWireByte ?? 0) * wireBytes;
}

/** Bits per second of the fitted β (for the report). */
export function linkBitsPerSecond(link: LinkCost): number {
  return link.msPerWireByte > 0 ? (8 * 1000) / link.msPerWireByte : Infinity;
}

/**
 * α, β anchored at the smallest all-reduce (its time is nearly all latency): β by least squares through that point,
 * so the large all-reduces, where the bytes dominate, set it; α = the anchor's time less its bytes' share. Both
 * clamped at 0 (a noisy fit never predicts negative time). The CPU, where every sample has it: medianFit.
 */
export function fitLink(samples: readonly LinkSample[], ranks: number): LinkCost {
  if (samples.length < 2 || ranks < 2)
    throw new TandemError(
      'BAD_CONFIG',
      `fitLink: needs timings of at least 2 sizes across at least 2 ranks, got ${samples.length} across ${ranks}`,
    );
  const time = anchoredFit(samples.map(s => ({ x: allReduceWireBytes(s.bytes, ranks), y: s.ms })));
  const link: LinkCost = {
    alphaMs: time.alpha,
    msPerWireByte: time.beta,
    ranks,
    source: 'measured',
    samples: [...samples],
  };
  if (samples.every(s => s.cpuMs !== undefined)) {
    const cpu = medianFit(samples.map(s => ({ x: allReduceWireBytes(s.bytes, ranks), y: s.cpuMs! })));
    link.cpuAlphaMs = cpu.alpha;
    link.cpuMsPerWireByte = cpu.beta;
  }
  return link;
}

/**
 * The CPU fit: β by least squares over the sizes above the smallest (the bytes set it), α the median of y − β·x over
 * all. A process's CPU over a few milliseconds catches other threads' bursts (V8 compiling the new probe thread's
 * code during the first size), which an anchor would take for the fixed cost; the median sets one such burst aside.
 * Both clamped at 0.
 */
function medianFit(xy: readonly { x: number; y: number }[]): { alpha: number; beta: number } {
  const sorted = [...xy].sort((a, b) => a.x - b.x);
  const above = sorted.length > 2 ? sorted.slice(1) : sorted;
  const mx = above.reduce((s, p) => s + p.x, 0) / above.length,
    my = above.reduce((s, p) => s + p.y, 0) / above.length;
  let sxy = 0,
    sxx = 0;
  for (const p of above) {
    sxy += (p.x - mx) * (p.y - my);
    sxx += (p.x - mx) ** 2;
  }
  const beta = sxx > 0 ? Math.max(0, sxy / sxx) : 0;
  const rest = sorted.map(p => p.y - beta * p.x).sort((a, b) => a - b);
  const n = rest.length;
  const median = n % 2 === 1 ? rest[n >> 1] : (rest[n / 2 - 1] + rest[n / 2]) / 2;
  return { alpha: Math.max(0, median), beta };
}

/** y = α + β·x through the point of smallest x, β by least squares over the others; both clamped at 0. */
function anchoredFit(xy: readonly { x: number; y: number }[]): { alpha: number; beta: number } {
  const [anchor, ...rest] = [...xy].sort((a, b) => a.x - b.x);
  let sxy = 0,
    sxx = 0;
  for (const p of rest) {
    sxy += (p.x - anchor.x) * (p.y - anchor.y);
    sxx += (p.x - anchor.x) ** 2;
  }
  const beta = sxx > 0 ? Math.max(0, sxy / sxx) : 0;
  return { alpha: Math.max(0, anchor.y - beta * anchor.x), beta };
}

/** An emulated `--link` among `devices` (link-model.ts holds the exchange to bandwidth and latency). */
export function linkOfModel(link: LinkModel, devices: number): LinkCost {
  return { alphaMs: link.latencyMs, msPerWireByte: (8 * 1000) / link.bandwidth, ranks: devices, source: 'emulated' };
}

/** One line: `α 0.21 ms, β 0.94 Gbit/s (measured: 5 sizes, 4 B .. 16 MB)`. */
export function describeLink(link: LinkCost): string {
  const bps = linkBitsPerSecond(link);
  const rate =
    bps === Infinity
      ? 'unbounded'
      : bps >= 1e9
        ? `${(bps / 1e9).toFixed(2)} Gbit/s`
        : `${(bps / 1e6).toFixed(1)} Mbit/s`;
  const s = link.samples;
  const sizes =
    s && s.length > 0
      ? `: ${s.length} sizes, ${s.map(x => `${fmtBytes(x.bytes)} ${x.ms.toFixed(2)} ms`).join(', ')}`
      : '';
  const cpu =
    link.cpuAlphaMs === undefined
      ? ''
      : `; CPU per all-reduce ${link.cpuAlphaMs.toFixed(3)} ms + ` +
        `${((link.cpuMsPerWireByte ?? 0) * (1 << 20)).toFixed(2)} ms per wire MB`;
  return `α ${link.alphaMs.toFixed(3)} ms, β ${rate} (${link.source} across ${link.ranks}${sizes}${cpu})`;
}

function fmtBytes(b: number): string {
  return b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(1)} MB` : b >= 1024 ? `${(b / 1024).toFixed(0)} KB` : `${b} B`;
}
