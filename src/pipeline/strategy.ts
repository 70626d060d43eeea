/**
 * Strategies: how the gradients of one backward pass are grouped for
 * exchange. A strategy is a partition of the parameter layout into
 * contiguous groups in transmission order; the compute side hands a group to
 * the comm side the moment its last gradient is ready, the comm side
 * all-reduces and applies groups in that order. The math is the same for
 * every partition (each element is averaged and updated exactly once, in the
 * same way), so every strategy gives the parameters `sequential` gives.
 *
 * Built-ins: `sequential` (one group: all compute, then all comm),
 * `two-group` (method A: FC group = layers 1..p in transmission order, conv
 * group = the rest), `per-layer`, `buckets` (size-capped, first bucket small,
 * as PyTorch DDP). Users compose their own from the helpers below (see
 * CustomStrategy's example).
 */
import { TandemError } from '../errors.js';
import { layersOf, type ParameterGroup, type ParameterLayout } from '../model/parameter-layout.js';

export const STRATEGIES = ['sequential', 'two-group', 'per-layer', 'buckets'] as const;
export type StrategyName = (typeof STRATEGIES)[number];

/**
 * A strategy of the user's own: its groups of a layout, in transmission order.
 *
 * @example
 * ```ts
 * import { bucketRange, defaultSplitLayer, train, twoGroups, type CustomStrategy } from 'tandem';
 *
 * const fcThenBuckets: CustomStrategy = {
 *   name: 'fc-then-buckets',
 *   groups: layout => {
 *     const [fc, rest] = twoGroups(layout, defaultSplitLayer(layout));
 *     return [fc, ...bucketRange(layout, rest.start, rest.end, 256 * 1024)];
 *   },
 * };
 * await train({ model: 'alexnet-mini', strategy: fcThenBuckets });
 * ```
 */
export interface CustomStrategy {
  name: string;
  groups(layout: ParameterLayout): ParameterGroup[];
}

export type StrategySpec = StrategyName | CustomStrategy;

export interface StrategyOptions {
  /** two-group: p, the number of layers (transmission order) in the FC group. Default: the leading FC layers. */
  splitLayer?: number;
  /** buckets: cap of a bucket in MB (2^20 bytes). */
  bucketCapMB: number;
  /** buckets: cap of the first bucket in MB, small so the exchange starts early. */
  firstBucketMB: number;
}

/** Most exchange groups a run supports (control words are sized for this many). */
export const MAX_GROUPS = 1024;

export function sequentialGroups(layout: ParameterLayout): ParameterGroup[] {
  return [{ name: 'all', start: 0, end: layout.total }];
}

/** p = the number of leading fully connected layers in transmission order (method A's FC group). */
export function defaultSplitLayer(layout: ParameterLayout): number {
  const layers = layersOf(layout);
  let p = 0;
  while (p < layers.length && layers[p].fullyConnected) p++;
  return Math.max(1, Math.min(p, layers.length - 1));
}

/** Method A: layers 1..p (transmission order) then p+1..m. */
export function twoGroups(layout: ParameterLayout, p: number): ParameterGroup[] {
  const layers = layersOf(layout);
  if (!Number.isInteger(p) || p < 1 || p > layers.length) {
    throw new TandemError(
      'BAD_CONFIG',
      `two-group split p=${p} is out of range: the model has ${layers.length} layers with parameters (p in ` +
        `1..${layers.length})`,
    );
  }
  if (p === layers.length) return [{ name: 'fc', start: 0, end: layout.total }];
  const cut = layers[p].start;
  return [
    { name: 'fc', start: 0, end: cut },
    { name: 'conv', start: cut, end: layout.total },
  ];
}

export function perLayerGroups(layout: ParameterLayout): ParameterGroup[] {
  return layersOf(layout).map(l => ({ name: l.name, start: l.start, end: l.end }));
}

/**
 * Size-capped buckets over [start, end) in transmission order, at variable
 * boundaries: a bucket closes once it holds at least its cap.
 */
export function bucketRange(
  layout: ParameterLayout,
  start: number,
  end: number,
  capBytes: number,
  firstCapBytes = capBytes,
): ParameterGroup[] {
  const groups: ParameterGroup[] = [];
  let open = start;
  for (const v of layout.variables) {
    const vEnd = v.offset + v.size;
    if (v.offset < start || vEnd > end) continue;
    const cap = groups.length === 0 ? firstCapBytes : capBytes;
    if ((vEnd - open) * 4 >= cap) {
      groups.push({ name: `bucket${groups.length}`, start: open, end: vEnd });
      open = vEnd;
    }
  }
  if (open < end) groups.push({ name: `bucket${groups.length}`, start: open, end });
  return groups;
}

/** The exchange groups of `layout` under `spec`, validated. */
export function exchangeGroups(
  spec: StrategySpec,
  layout: ParameterLayout,
  options: StrategyOptions,
): ParameterGroup[] {
  let groups: ParameterGroup[];
  let name: string;
  if (typeof spec === 'object') {
    name = spec.name;
    groups = spec.groups(layout);
  } else {
    name = spec;
    switch (spec) {
      case 'sequential':
        groups = sequentialGroups(layout);
        break;
      case 'two-group':
        groups = twoGroups(layout, options.splitLayer ?? defaultSplitLayer(layout));
        break;
      case 'per-layer':
        groups = perLayerGroups(layout);
        break;
      case 'buckets':
        groups = bucketRange(layout, 0, layout.total, options.bucketCapMB * 2 ** 20, options.firstBucketMB * 2 ** 20);
        break;
      default: {
        const never: never = spec;
        throw new TandemError('BAD_CONFIG', `unknown strategy ${String(never)}`);
      }
    }
  }
  validateGroups(name, groups, layout);
  return groups;
}

function validateGroups(name: string, groups: ParameterGroup[], layout: ParameterLayout): void {
  const fail = (why: string): never => {
    throw new TandemError('BAD_CONFIG', `strategy '${name}': ${why}`);
  };
  if (!Array.isArray(groups) || groups.length === 0) fail('returned no groups');
  if (groups.length > MAX_GROUPS)
    fail(`returned ${groups.length} groups; at most ${MAX_GROUPS} are supported (use larger buckets)`);
  let at = 0;
  groups.forEach((g, i) => {
    if (!g || !Number.isInteger(g.start) || !Number.isInteger(g.end)) fail(`group ${i} needs integer start and end`);
    if (g.start !== at)
      fail(
        `group ${i} (${g.name}) starts at ${g.start}, expected ${at}: groups must be contiguous, in transmission ` +
          `order, from 0`,
      );
    if (g.end <= g.start) fail(`group ${i} (${g.name}) is empty`);
    at = g.end;
  });
  if (at !== layout.total) fail(`groups cover [0, ${at}) but the model has ${layout.total} parameters`);
}
