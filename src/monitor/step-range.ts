/**
 * Which steps a timeline picture draws: the last few (the default: spans wide
 * enough to see), a range A..B, or the whole run. Spans carry their step.
 */
import type { Span } from './span.js';
import { TandemError } from '../errors.js';

export type StepRange =
  { kind: 'last'; count: number } | { kind: 'between'; first?: number; last?: number } | { kind: 'all' };

/** What `tandem trace` draws unless told otherwise. */
export const DEFAULT_STEP_RANGE: StepRange = { kind: 'last', count: 3 };

export interface StepSelection {
  spans: Span[];
  /** Steps of the spans kept; undefined when none is kept. */
  first?: number;
  last?: number;
  /** Steps of all the spans given; undefined when none is given. */
  runFirst?: number;
  runLast?: number;
}

function stepBounds(spans: readonly Span[]): { first?: number; last?: number } {
  if (spans.length === 0) return {};
  let first = Infinity,
    last = -Infinity;
  for (const s of spans) {
    first = Math.min(first, s.step);
    last = Math.max(last, s.step);
  }
  return { first, last };
}

export function selectSteps(spans: readonly Span[], range: StepRange): StepSelection {
  const run = stepBounds(spans);
  let kept: Span[];
  switch (range.kind) {
    case 'all':
      kept = [...spans];
      break;
    case 'last':
      kept = spans.filter(s => s.step > (run.last ?? 0) - range.count);
      break;
    case 'between':
      kept = spans.filter(s => s.step >= (range.first ?? -Infinity) && s.step <= (range.last ?? Infinity));
      break;
    default: {
      const never: never = range;
      throw new Error(`unknown step range ${JSON.stringify(never)}`);
    }
  }
  return { spans: kept, ...stepBounds(kept), runFirst: run.first, runLast: run.last };
}

/** `step 4` or `steps 4-6`. */
export const stepsText = (first: number, last: number): string =>
  first === last ? `step ${first}` : `steps ${first}-${last}`;

/** For a title: e.g. `steps 4-6 of 1-6`, `all steps 1-6`, `no steps`. */
export function describeSelection(sel: StepSelection): string {
  if (sel.first === undefined || sel.last === undefined || sel.runFirst === undefined || sel.runLast === undefined)
    return 'no steps';
  if (sel.first === sel.runFirst && sel.last === sel.runLast) return `all ${stepsText(sel.first, sel.last)}`;
  return `${stepsText(sel.first, sel.last)} of ${sel.runFirst}-${sel.runLast}`;
}

/** `A..B`, `A..`, `..B` or `A` (one step); `flag` names the option in the error. */
export function parseStepRange(text: string, flag = '--steps'): StepRange {
  const m = /^\s*(\d+)?\s*(\.\.)?\s*(\d+)?\s*$/.exec(text);
  const bad = () => new TandemError('BAD_CONFIG', `${flag} ${text}: expected A..B (e.g. 4..6), A.., ..B or one step A`);
  if (!m || (m[1] === undefined && m[3] === undefined) || (m[2] === undefined && m[3] !== undefined)) throw bad();
  const first = m[1] === undefined ? undefined : Number(m[1]);
  const last = m[2] === undefined ? first : m[3] === undefined ? undefined : Number(m[3]);
  if (first !== undefined && last !== undefined && first > last) {
    throw new TandemError('BAD_CONFIG', `${flag} ${text}: the first step is after the last (write ${last}..${first})`);
  }
  return { kind: 'between', first, last };
}
