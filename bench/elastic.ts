/**
 * `npm run bench -- elastic [--rates 1gbit] [--steps 120]`: what a lost host costs an elastic run. Three hosts × 1
 * device in network namespaces on a bridge (test/fixtures/host-trio.ts), every host's link shaped to the rate,
 * `--min-hosts 2`, the test's mlp (test/fixtures/elastic-host.ts, stall timeout 4 s); host 2 killed with SIGKILL, or
 * its cable cut, once it reported step 15. Per case: the seconds from the fault to host 0's next completed step, the
 * steps lost (steps host 0 had completed that the survivors trained again: the last it reported before the regroup
 * minus the step they went on from), and whether hosts 0 and 1 finished. Table and JSON. Needs root.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { namespaceSupport } from './network-namespaces.js';
import { makeHostTrio } from '../test/fixtures/host-trio.js';
import { elasticHost, killAllHosts } from '../test/fixtures/elastic-hosts.js';

const PORT = 29500;
const FAULT_AFTER = 15;
type Fault = 'kill' | 'cut';

interface Row {
  rate: string;
  fault: Fault;
  secondsToNextStep?: number;
  wentOnFrom?: number;
  lastStepBefore?: number;
  stepsLost?: number;
  finished: boolean;
}

async function oneCase(rate: string, fault: Fault, steps: number): Promise<Row> {
  const trio = makeHostTrio();
  try {
    trio.shape(rate);
    const rendezvous = `${trio.addresses[0]}:${PORT}`;
    const env = { ELASTIC_STEPS: String(steps), TANDEM_JOB_SECRET: randomBytes(32).toString('base64') };
    const hosts = [0, 1, 2].map(r =>
      elasticHost(r, 3, rendezvous, 2, (command, args, options) => trio.spawn(r, command, args, options), env),
    );
    await hosts[2].seen(new RegExp(`^step ${FAULT_AFTER}$`));
    const at = performance.now();
    if (fault === 'kill') hosts[2].child.kill('SIGKILL');
    else trio.setLink(2, false);
    const ends = await Promise.all(hosts.slice(0, 2).map(h => h.ended));
    hosts[2].child.kill('SIGKILL');
    const lines = hosts[0].lines;
    const goingOn = lines.findIndex(l => /^warning elastic: .*going on from step \d+/.test(l.text));
    const from = goingOn < 0 ? undefined : Number(/going on from step (\d+)/.exec(lines[goingOn].text)![1]);
    const before = lines
      .slice(0, Math.max(0, goingOn))
      .map(l => /^step (\d+)$/.exec(l.text)?.[1])
      .filter((s): s is string => s !== undefined)
      .map(Number)
      .at(-1);
    const next = goingOn < 0 ? undefined : lines.slice(goingOn).find(l => /^step \d+$/.test(l.text));
    return {
      rate,
      fault,
      secondsToNextStep: next && (next.at - at) / 1000,
      wentOnFrom: from,
      lastStepBefore: before,
      stepsLost: from !== undefined && before !== undefined ? Math.max(0, before - from) : undefined,
      finished: ends.every(e => e.code === 0),
    };
  } finally {
    killAllHosts();
    trio.close();
  }
}

export async function runElasticBench(o: { rates: string[]; steps: number; out: string }): Promise<void> {
  const support = namespaceSupport();
  if (!support.ok) {
    console.log(`bench elastic: skipped: ${support.reason}`);
    return;
  }
  console.log(
    `elastic: 3 hosts × 1 device in network namespaces, --min-hosts 2, mlp, ${o.steps} steps, stall timeout 4 s; ` +
      `host 2 lost after step ${FAULT_AFTER}`,
  );
  console.log(
    '| link | fault | s from fault to next step | went on from | last step before | steps lost | finished |\n' +
      '|---|---|---:|---:|---:|---:|---|',
  );
  const rows: Row[] = [];
  for (const rate of o.rates) {
    for (const fault of ['kill', 'cut'] as const) {
      const r = await oneCase(rate, fault, o.steps);
      rows.push(r);
      console.log(
        `| ${rate} | ${fault} | ${r.secondsToNextStep?.toFixed(1) ?? '-'} | ${r.wentOnFrom ?? '-'} | ` +
          `${r.lastStepBefore ?? '-'} | ${r.stepsLost ?? '-'} | ${r.finished ? 'yes' : 'NO'} |`,
      );
    }
  }
  mkdirSync(o.out, { recursive: true });
  writeFileSync(
    `${o.out}/elastic.json`,
    JSON.stringify({ bench: 'elastic', date: new Date().toISOString(), steps: o.steps, rows }, null, 2),
  );
  console.log(`\nJSON: ${o.out}/elastic.json`);
}
