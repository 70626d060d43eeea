/**
 * A finished run's dashboard feed, from its files in `--out DIR`: the event log (`events.jsonl`, the messages the
 * live page got; without one, the summary's loss history), the summary (`summary.json`) and the timeline of the last
 * steps drawn from its Chrome trace. The files are read as untrusted: a line or field of the wrong shape is left out
 * (and counted), never shown as markup.
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { fsReason } from '../output/fs-reason.js';
import { OUT_FILES } from '../output/output-places.js';
import { DashboardFeed, jsonSafe, type DashboardMessage, type DashboardSummary } from '../monitor/dashboard-feed.js';
import { spansFromChromeTrace, timelineSvg } from '../monitor/timeline-picture.js';
import { DEFAULT_STEP_RANGE } from '../monitor/step-range.js';
import { readTrace } from './trace-command.js';
import { readTextFileSync as readRunFile } from '../read-regular-file.js';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const isNumber = (v: unknown) => typeof v === 'number' || v === null; // JSON writes NaN as null
const isNumbers = (v: unknown) => Array.isArray(v) && v.every(isNumber);

const STEP_NUMBERS = ['step', 'loss', 'accuracy', 'lr', 'samplesPerSecond', 'stepMs', 'overlap'];
const STEP_LISTS = ['computeMs', 'exchangeMs', 'waitMs', 'hosts'];

/** A line of the event log, if it has the shape of a message the page reads; null: one left out on purpose. */
function messageOf(v: unknown): DashboardMessage | null | undefined {
  if (!isObject(v)) return undefined;
  switch (v.kind) {
    case 'config':
      return typeof v.title === 'string' && isObject(v.config) ? (v as DashboardMessage) : undefined;
    case 'step': {
      const s = v.step;
      if (!isObject(s) || !STEP_NUMBERS.every(k => isNumber(s[k])) || !STEP_LISTS.every(k => isNumbers(s[k])))
        return undefined;
      return v as DashboardMessage;
    }
    case 'event':
      return isObject(v.event) && typeof v.event.type === 'string' ? (v as DashboardMessage) : undefined;
    case 'summary':
      return null; // summary.json's is shown
    default:
      return undefined;
  }
}

function readJson(file: string, what: string): unknown {
  try {
    return JSON.parse(readRunFile(file));
  } catch (err) {
    const reason = err instanceof SyntaxError ? `invalid JSON (${err.message})` : fsReason(err);
    throw new TandemError('BAD_CONFIG', `tandem dashboard: cannot read ${what} ${file}: ${reason}`);
  }
}

function summaryOf(s: Json): DashboardSummary {
  const n = (k: string) => (typeof s[k] === 'number' ? s[k] : NaN);
  const heldOut = isObject(s.heldOut) && typeof s.heldOut.accuracy === 'number' ? s.heldOut.accuracy : undefined;
  return {
    steps: n('steps'),
    finalLoss: n('finalLoss'),
    finalAccuracy: n('finalAccuracy'),
    samplesPerSecond: n('samplesPerSecond'),
    wallSeconds: n('wallSeconds'),
    ...(typeof s.stoppedAt === 'number' ? { stoppedAt: s.stoppedAt } : {}),
    ...(heldOut === undefined ? {} : { heldOutAccuracy: heldOut }),
  };
}

/** The loss history of summary.json as steps (no timings: a run from before the event log). */
function historySteps(s: Json): DashboardMessage[] {
  if (!Array.isArray(s.history)) return [];
  return s.history.filter(isObject).map(h => ({
    kind: 'step' as const,
    step: {
      ...{ step: Number(h.step), loss: Number(h.loss), accuracy: Number(h.accuracy) },
      ...{ lr: NaN, samplesPerSecond: NaN, stepMs: NaN, overlap: NaN, dataWaitMs: NaN },
      ...{ computeMs: [], exchangeMs: [], exchangeBytes: [], waitMs: [], hosts: [] },
    },
  }));
}

/** The feed of the finished run in `dir`; `warn`: what was left out. */
export function finishedRunFeed(dir: string, warn: (line: string) => void): DashboardFeed {
  const summary = readJson(path.join(dir, OUT_FILES.summary), 'the summary of a finished run (give its --out)');
  if (!isObject(summary))
    throw new TandemError('BAD_CONFIG', `tandem dashboard: ${path.join(dir, OUT_FILES.summary)} is not a run summary`);
  const feed = new DashboardFeed();
  const log = path.join(dir, OUT_FILES.events);
  let lines: string[] | undefined;
  try {
    lines = readRunFile(log)
      .split('\n')
      .filter(l => l.trim() !== '');
  } catch (err) {
    warn(
      (err as NodeJS.ErrnoException).code === 'ENOENT'
        ? `no event log ${log} (a run before tandem wrote one): the loss history of the summary only`
        : `the event log ${log} cannot be read (${fsReason(err)}): the loss history of the summary only`,
    );
  }
  const messages = lines ? lines.map(l => messageOf(parseLine(l))).filter(m => m !== null) : historySteps(summary);
  const bad = messages.filter(m => m === undefined).length;
  if (bad > 0) warn(`${bad} of ${messages.length} lines of ${log} are not dashboard messages: left out`);
  if (!messages.some(m => m?.kind === 'config'))
    feed.publish({
      kind: 'config',
      title: `tandem: ${dir}`,
      config: jsonSafe(isObject(summary.config) ? summary.config : {}),
    });
  for (const m of messages) if (m) feed.publish(m);
  const timeline = timelineOf(dir, summary, warn);
  if (timeline) feed.publish({ kind: 'timeline', svg: timeline });
  feed.publish({ kind: 'summary', summary: summaryOf(summary) });
  feed.publish({ kind: 'end' });
  return feed;
}

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** The timeline of the run's last steps, from its trace (the summary's tracePath, else DIR/trace.json). */
function timelineOf(dir: string, summary: Json, warn: (line: string) => void): string | undefined {
  const given = typeof summary.tracePath === 'string' ? summary.tracePath : undefined;
  const file = [given, path.join(dir, OUT_FILES.trace)].find(f => f !== undefined && readable(f));
  if (!file) return undefined;
  try {
    return timelineSvg(spansFromChromeTrace(readTrace(file)), `tandem: ${dir}`, { steps: DEFAULT_STEP_RANGE });
  } catch (err) {
    warn(`the trace ${file} was left out: ${(err as Error).message}`);
    return undefined;
  }
}

function readable(file: string): boolean {
  return existsSync(file) && statSync(file).isFile();
}
