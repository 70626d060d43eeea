/**
 * A count a person or a launcher writes: decimal digits only. `Number()` also reads `0x2`, ` 2`, `2.0`, `1e1` and
 * `''` (as 0), which nobody means as a count of hosts, steps or ranks.
 *
 * @example
 * decimalCount('16') // 16
 * decimalCount('0x2') // undefined
 */
export function decimalCount(text: string): number | undefined {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  return Number.isSafeInteger(n) ? n : undefined;
}
