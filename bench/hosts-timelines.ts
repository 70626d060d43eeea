/**
 * `npm run bench -- hosts-timelines [--models alexnet-mini] [--links 1G,100M] [--schedules
 * sequential-none,two-group-seed-none,two-group-priority-none] [--out docs]`:
 * from the traces `npm run bench -- hosts` left in out/hosts-timelines (host 0's Chrome trace of every run, every
 * host's spans), one picture per model and link that stacks the schedules' last three steps on ONE time scale —
 * what overlap buys is the difference in width. Writes OUT/hosts-MODEL-LINK.svg.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { drawnRangeMs, spansFromChromeTrace, timelineSvg } from '../src/monitor/timeline-picture.js';
import type { StepRange } from '../src/monitor/step-range.js';

export interface HostsTimelinesOptions {
  models: string[];
  links: string[];
  schedules: string[];
  out: string;
}

const TRACES = 'out/hosts-timelines';
const LAST_STEPS: StepRange = { kind: 'last', count: 3 };

/** `1G` → `1gbit`, `100M` → `100mbit` (as the hosts bench names its links); other text as it is. */
function linkName(text: string): string {
  const m = /^(\d+(?:\.\d+)?)([kmg])$/i.exec(text);
  return m ? `${m[1]}${{ k: 'kbit', m: 'mbit', g: 'gbit' }[m[2].toLowerCase() as 'k' | 'm' | 'g']}` : text;
}

/** The schedules' pictures of one model and link stacked into one SVG at one scale; undefined when none was traced. */
function stackedPicture(model: string, link: string, schedules: readonly string[]): string | undefined {
  const runs = schedules
    .map(s => ({ schedule: s, file: `${TRACES}/${model}-${link}-${s}.json` }))
    .filter(r => existsSync(r.file))
    .map(r => ({ ...r, spans: spansFromChromeTrace(JSON.parse(readFileSync(r.file, 'utf8'))) }));
  if (runs.length === 0) return undefined;
  const spanMs = Math.max(...runs.map(r => drawnRangeMs(r.spans, LAST_STEPS)));
  let y = 0,
    width = 0;
  const parts = runs.map(r => {
    const svg = timelineSvg(
      r.spans,
      `${model}, 2 hosts, ${link} (real TCP, tc tbf): ${r.schedule.replace(/-none$/, '')}`,
      { steps: LAST_STEPS, spanMs },
    );
    const size = /width="(\d+(?:\.\d+)?)" height="(\d+(?:\.\d+)?)"/.exec(svg);
    const [w, h] = size ? [Number(size[1]), Number(size[2])] : [0, 0];
    const placed = svg.replace('<svg xmlns="http://www.w3.org/2000/svg"', `<svg x="0" y="${y}"`);
    y += h;
    width = Math.max(width, w);
    return placed;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}">\n${parts.join('\n')}\n</svg>\n`;
}

export function runHostsTimelines(opts: HostsTimelinesOptions): void {
  mkdirSync(opts.out, { recursive: true });
  for (const model of opts.models) {
    for (const link of opts.links.map(linkName)) {
      const svg = stackedPicture(model, link, opts.schedules);
      if (svg === undefined) {
        console.log(
          `${model} at ${link}: no trace of ${opts.schedules.join(', ')} in ${TRACES} (run npm run bench -- hosts ` +
            `first)`,
        );
        continue;
      }
      const file = `${opts.out}/hosts-${model}-${link}.svg`;
      writeFileSync(file, svg);
      console.log(`${model} at ${link}: ${file}`);
    }
  }
}
