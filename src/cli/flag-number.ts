/**
 * A number flag's text as a number, in the notation a person writes: an
 * integer flag takes decimal digits (`8`, `-1`), a real one decimal or
 * exponent notation (`0.01`, `.5`, `1e-3`). Anything `Number()` reads besides
 * (`0x10`, `1e3` for a count, `' 8'`, `''`, `Infinity`) is BAD_CONFIG naming
 * the flag, the text and what is expected.
 */
import { TandemError } from '../errors.js';

export type NumberKind = 'integer' | 'real';

const NOTATION: Record<NumberKind, { pattern: RegExp; expected: string }> = {
  integer: { pattern: /^-?\d+$/, expected: 'written as decimal digits (an integer, e.g. 8)' },
  real: {
    pattern: /^-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i,
    expected: 'written in decimal or exponent notation (e.g. 0.01 or 1e-3)',
  },
};

export function flagNumber(flag: string, text: string, kind: NumberKind): number {
  const { pattern, expected } = NOTATION[kind];
  const n = Number(text);
  if (!pattern.test(text) || !Number.isFinite(n))
    throw new TandemError('BAD_CONFIG', `--${flag} must be a number ${expected}, got '${text}'`);
  if (kind === 'integer' && !Number.isSafeInteger(n)) {
    throw new TandemError(
      'BAD_CONFIG',
      `--${flag} must be an integer of at most ${Number.MAX_SAFE_INTEGER} in magnitude, got '${text}'`,
    );
  }
  return n;
}
