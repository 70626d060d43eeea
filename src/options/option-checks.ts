/**
 * The per-option checks declarations use: each takes the given value (no default applied) and the field, and
 * returns the value or throws BAD_CONFIG naming the field (`config.<field>: …`). Pure and synchronous.
 */
import { bad, finite, oneOf, shown } from '../config-checks.js';

export type Check<T> = (value: unknown, field: string) => T;

/** An integer in [1, max]. */
export function positiveInt(max = Number.MAX_SAFE_INTEGER): Check<number> {
  return (v, field) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max)
      bad(field, `must be an integer in [1, ${max}], got ${shown(v)}`);
    return v;
  };
}

/** An integer >= 0, `zero` saying what 0 means (`0: off`). */
export function nonNegativeInt(zero = '0: off'): Check<number> {
  return (v, field) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
      bad(field, `must be an integer >= 0 (${zero}), got ${shown(v)}`);
    return v;
  };
}

/** An integer in [0, max], `zero` saying what 0 means. */
export function intUpTo(max: number, zero: string): Check<number> {
  return (v, field) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max)
      bad(field, `must be an integer in [0, ${max}] (${zero}), got ${shown(v)}`);
    return v;
  };
}

/** A finite number in [min, max]. */
export function finiteIn(min: number, max: number): Check<number> {
  return (v, field) => finite(field, v, min, max);
}

/** One of `options`. */
export function choice<T extends string>(options: readonly T[]): Check<T> {
  return (v, field) => oneOf(field, v, options);
}

/** A non-empty string; `message` otherwise (`must be a path`). */
export function nonEmpty(message: string): Check<string> {
  return (v, field) => {
    if (typeof v !== 'string' || v === '') bad(field, message);
    return v;
  };
}

/** true or false. */
export const trueOrFalse: Check<boolean> = (v, field) => {
  if (typeof v !== 'boolean') bad(field, `must be true or false, got ${JSON.stringify(v)}`);
  return v;
};
