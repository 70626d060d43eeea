/**
 * What a data module's function returned, in words for a message: the value
 * itself (shortened), and for a label that is no number, what it looks like
 * and the way out (an async `read`, a one-hot vector, a class name).
 */

/** `v` as a message shows it: JSON, shortened; `nothing (undefined)`, `a function`, `a Promise`. */
export function found(v: unknown): string {
  if (v === undefined) return 'nothing (undefined)';
  if (v === null) return 'null';
  if (typeof v === 'function') return 'a function';
  if (v instanceof Promise) return 'a Promise';
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name} of ${(v as unknown as ArrayLike<number>).length}`;
  const text = JSON.stringify(v);
  return text === undefined ? typeof v : text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** Why a label that is not a number cannot be one, with the fix; undefined for a number. */
export function nonNumberLabelProblem(v: unknown): string | undefined {
  if (typeof v === 'number') return undefined;
  if (
    v instanceof Promise ||
    (typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function')
  ) {
    return (
      'not a number but a Promise: read must be synchronous and return the label itself (an async read returns ' +
      'one): load or decode the data in the factory, ' +
      'which may be async, and have read copy from memory'
    );
  }
  if (Array.isArray(v) || ArrayBuffer.isView(v)) {
    return (
      'not a number but a list: read returns the class id, not a one-hot vector or a list: return the index of ' +
      'the 1 (e.g. 2 for [0, 0, 1])'
    );
  }
  if (typeof v === 'string')
    return 'not a number but a string: return the class id (map class names to 0 … classes-1 in the module)';
  return 'not a number: a label is the class id (or, for a regression, the target)';
}
