/**
 * `tandem trace TRACE.json --svg OUT.svg [--png OUT.png] [--steps A..B | --last N | --all]`:
 * draws a Chrome trace written by `--trace` or `--out`; by default the last
 * three steps, so the spans are wide enough to see.
 */
import { parseArgs } from 'node:util';
import { TandemError } from '../errors.js';
import { fsReason } from '../output/fs-reason.js';
import { readTextFileSync } from '../read-regular-file.js';
import { prepareOutputPlaces } from '../output/output-places.js';
import { writeFileAtomically } from '../output/atomic-write.js';
import { drawnSpans, spansFromChromeTrace, timelinePng, timelineSvg } from '../monitor/timeline-picture.js';
import { DEFAULT_STEP_RANGE, parseStepRange, selectSteps, stepsText, type StepRange } from '../monitor/step-range.js';
import { decimalCount } from '../decimal-count.js';

export const TRACE_USAGE = 'tandem trace TRACE.json --svg OUT.svg [--png OUT.png] [--steps A..B | --last N | --all]';

function stepRangeOf(values: { steps?: string; last?: string; all?: boolean }): StepRange {
  const given = [
    values.steps !== undefined && '--steps',
    values.last !== undefined && '--last',
    values.all && '--all',
  ].filter(Boolean);
  if (given.length > 1)
    throw new TandemError('BAD_CONFIG', `tandem trace: ${given.join(' and ')} both choose the steps drawn; give one`);
  if (values.all) return { kind: 'all' };
  if (values.steps !== undefined) return parseStepRange(values.steps);
  if (values.last !== undefined) {
    const count = decimalCount(values.last);
    if (count === undefined || count < 1)
      throw new TandemError('BAD_CONFIG', `--last ${values.last}: expected a number of steps (1 or more)`);
    return { kind: 'last', count };
  }
  return DEFAULT_STEP_RANGE;
}

type ChromeTrace = Parameters<typeof spansFromChromeTrace>[0];

export function readTrace(file: string): ChromeTrace {
  let text: string;
  try {
    text = readTextFileSync(file);
  } catch (err) {
    throw new TandemError('BAD_CONFIG', `tandem trace ${file}: cannot read it: ${fsReason(err)}`, undefined, {
      cause: err,
    });
  }
  let trace: unknown;
  try {
    trace = JSON.parse(text);
  } catch (err) {
    const found =
      text.trim() === ''
        ? 'an empty file'
        : `invalid JSON (${(err as Error).message}; the file has ${text.length} characters: truncated?)`;
    throw new TandemError(
      'BAD_CONFIG',
      `tandem trace ${file}: expected a Chrome trace written by --trace or --out, found ${found}`,
    );
  }
  const events = (trace as { traceEvents?: unknown } | null)?.traceEvents;
  if (!Array.isArray(events))
    throw new TandemError('BAD_CONFIG', `tandem trace ${file}: not a Chrome trace (no traceEvents)`);
  events.forEach((e: unknown, i) => {
    const problem = eventProblem(e);
    if (problem) {
      throw new TandemError(
        'BAD_CONFIG',
        `tandem trace ${file}: traceEvents[${i}] ${problem}; expected the events of a trace written by tandem's ` +
          `--trace or --out ` +
          '({ ph, name, ts, dur, pid, tid, args: { step } })',
      );
    }
  });
  return trace as ChromeTrace;
}

/**
 * What is wrong with one trace event, else undefined. Events other than complete ones ('X') are not drawn; only their
 * shape matters.
 */
function eventProblem(e: unknown): string | undefined {
  if (e === null || typeof e !== 'object' || Array.isArray(e))
    return (
      `is ${e === null ? 'null' : Array.isArray(e) ? 'an array' : `${typeof e} ${JSON.stringify(e)}`}, not an ` +
      `event object`
    );
  const ev = e as Record<string, unknown>;
  if (ev.ph !== 'X') return undefined;
  const name = typeof ev.name === 'string' ? `("${ev.name}") ` : '';
  for (const key of ['ts', 'dur', 'pid', 'tid'] as const) {
    const v = ev[key];
    if (typeof v !== 'number' || !Number.isFinite(v) || (key === 'dur' && v < 0)) {
      return (
        `${name}has ${key} ${JSON.stringify(v) ?? 'missing'}, where a ` +
        `${key === 'dur' ? 'non-negative ' : ''}number is needed`
      );
    }
  }
  const args = ev.args as Record<string, unknown> | undefined;
  if (args !== undefined && (args === null || typeof args !== 'object'))
    return `${name}has args ${JSON.stringify(args)}, where an object is needed`;
  for (const key of ['step', 'group', 'device'] as const) {
    const v = args?.[key];
    if (v !== undefined && !Number.isInteger(v))
      return `${name}has args.${key} ${JSON.stringify(v)}, where an integer is needed`;
  }
  return undefined;
}

export async function traceCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        svg: { type: 'string' },
        png: { type: 'string' },
        steps: { type: 'string' },
        last: { type: 'string' },
        all: { type: 'boolean' },
      },
    });
  } catch (err) {
    throw new TandemError('BAD_CONFIG', `tandem trace: ${(err as Error).message}; usage: ${TRACE_USAGE}`);
  }
  const { values, positionals } = parsed;
  const file = positionals[0];
  if (!file || (!values.svg && !values.png)) throw new TandemError('BAD_CONFIG', `usage: ${TRACE_USAGE}`);
  const steps = stepRangeOf(values);
  const spans = spansFromChromeTrace(readTrace(file));
  const selection = selectSteps(spans, steps);
  if (spans.length > 0 && selection.spans.length === 0) {
    throw new TandemError(
      'BAD_CONFIG',
      `tandem trace ${file}: no span in the steps asked for; the trace holds steps ` +
        `${selection.runFirst}-${selection.runLast}`,
    );
  }
  const pictures = [
    ['--svg', values.svg],
    ['--png', values.png],
  ].flatMap(([flag, p]) => (p ? [{ kind: 'file' as const, path: p, label: `${flag} ${p}` }] : []));
  await prepareOutputPlaces(pictures);
  const title = `tandem timeline: ${file}`,
    drawn =
      `${drawnSpans(selection.spans).length} spans drawn, ` +
      `${selection.first === undefined ? 'no steps' : stepsText(selection.first, selection.last!)}`;
  if (values.svg) {
    await writeFileAtomically(values.svg, timelineSvg(spans, title, { steps }));
    console.log(`svg: ${values.svg} (${drawn})`);
  }
  if (values.png) {
    await writeFileAtomically(values.png, timelinePng(spans, title, { steps }));
    console.log(`png: ${values.png} (${drawn})`);
  }
  return 0;
}
