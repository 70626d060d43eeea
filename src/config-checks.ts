/**
 * The checks a train config's fields go through, each a BAD_CONFIG naming the field (`config.<field>: …`), shared by
 * the modules that resolve parts of the config (config.ts, optim/resolve-optimizer.ts).
 */
import { TandemError } from './errors.js';

export function bad(field: string, message: string): never {
  throw new TandemError('BAD_CONFIG', `config.${field}: ${message}`);
}

/** A value as a message shows it: JSON, but NaN and ±Infinity by name (JSON writes them as null). */
export function shown(v: unknown): string {
  return typeof v === 'number' && !Number.isFinite(v) ? String(v) : JSON.stringify(v);
}

/** A finite number in [min, max], or in [min, max) when `maxOpen`. */
export function finite(field: string, v: unknown, min: number, max: number, maxOpen = false): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (maxOpen && v === max)) {
    bad(field, `must be a number in [${min}, ${max}${maxOpen ? ')' : ']'}, got ${shown(v)}`);
  }
  return v;
}

export function oneOf<T extends string>(field: string, v: unknown, options: readonly T[]): T {
  if (!options.includes(v as T))
    bad(field, `must be one of ${options.join(', ')}, got ${JSON.stringify(v)}${meant(v, options)}`);
  return v as T;
}

/**
 * ` (did you mean adam?)` for a name that is one of `options` but for its case or separators (`Adam`, `RMSProp`,
 * `per_layer`, as tfjs and Keras write them), else '' (a near name may be another thing: `adamw` is not `adam`).
 */
export function meant(v: unknown, options: readonly string[]): string {
  const norm = (s: string) => s.toLowerCase().replace(/_/g, '-');
  const same = typeof v === 'string' ? options.find(o => norm(o) === norm(v)) : undefined;
  return same === undefined ? '' : ` (did you mean ${same}?)`;
}
