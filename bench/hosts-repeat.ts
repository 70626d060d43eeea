/**
 * `npm run bench -- hosts-repeat A.json B.json`: two runs of `npm run bench -- hosts`
 * with the same options, compared row by row — how much the same schedule's
 * measured step, and auto's prediction of it, moved from one run to the other.
 * That spread is the floor under "the cost model predicts step times within
 * 15%": a prediction cannot be checked closer than the measurement it is
 * checked against repeats.
 *
 * @example
 * compareHostsRuns(first.rows, second.rows) // [{ link: '1gbit', schedule: 'sequential', measured: [66.1, 56.1],
 * measuredRatio: 0.85, … }]
 */
import { readFileSync } from 'node:fs';
import type { HostsRow } from './hosts-figures.js';

export interface RepeatRow {
  model: string;
  link: string;
  schedule: string;
  /** The step, ms, in the first run and in the second. */
  measured: [number, number];
  measuredRatio: number;
  /** auto's prediction, ms, in each run (tandem rows). */
  predicted?: [number, number];
  predictedRatio?: number;
}

type RowFields = Pick<HostsRow, 'model' | 'link' | 'schedule' | 'stepMs' | 'predictedMs'>;

/** The rows both runs have (by model, link and schedule), in the first run's order. */
export function compareHostsRuns(first: readonly RowFields[], second: readonly RowFields[]): RepeatRow[] {
  const key = (r: RowFields) => `${r.model}\n${r.link}\n${r.schedule}`;
  const later = new Map(second.map(r => [key(r), r]));
  const out: RepeatRow[] = [];
  for (const a of first) {
    const b = later.get(key(a));
    if (!b) continue;
    const row: RepeatRow = {
      model: a.model,
      link: a.link,
      schedule: a.schedule,
      measured: [a.stepMs, b.stepMs],
      measuredRatio: b.stepMs / a.stepMs,
    };
    if (a.predictedMs !== undefined && b.predictedMs !== undefined) {
      row.predicted = [a.predictedMs, b.predictedMs];
      row.predictedRatio = b.predictedMs / a.predictedMs;
    }
    out.push(row);
  }
  return out;
}

/** The smallest and largest of `ratios`, as "0.85–1.18". */
function range(ratios: number[]): string {
  return ratios.length === 0 ? '–' : `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`;
}

export function runHostsRepeat(firstPath: string, secondPath: string): void {
  const load = (p: string) => JSON.parse(readFileSync(p, 'utf8')) as { date: string; rows: RowFields[] };
  const [a, b] = [load(firstPath), load(secondPath)];
  const rows = compareHostsRuns(a.rows, b.rows);
  if (rows.length === 0)
    throw new Error(
      `hosts-repeat: ${firstPath} and ${secondPath} have no row in common (the same --models and --rates?)`,
    );
  console.log(
    `hosts-repeat: ${firstPath} (${a.date}) then ${secondPath} (${b.date})\n` +
      ('| model | link | schedule | step ms, first | second | second / first | predicted ms, first | second | second ' +
        '/ first |\n|---|---|---|---:|---:|---:|---:|---:|---:|'),
  );
  const f = (x?: number) => (x === undefined ? '' : x.toFixed(1));
  for (const r of rows) {
    console.log(
      `| ${r.model} | ${r.link} | ${r.schedule} | ${f(r.measured[0])} | ${f(r.measured[1])} | ` +
        `${r.measuredRatio.toFixed(2)} | ` +
        (`${f(r.predicted?.[0])} | ${f(r.predicted?.[1])} | ` +
          `${r.predictedRatio === undefined ? '' : r.predictedRatio.toFixed(2)} |`),
    );
  }
  for (const link of [...new Set(rows.map(r => r.link))]) {
    const mine = rows.filter(r => r.link === link && r.predictedRatio !== undefined);
    if (mine.length === 0) continue;
    console.log(
      `${link}: the same schedule measured ${range(mine.map(r => r.measuredRatio))}x, predicted ` +
        `${range(mine.map(r => r.predictedRatio!))}x from one run to the other (${mine.length} tandem schedules)`,
    );
  }
}
