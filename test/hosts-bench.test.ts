// The hosts bench's arithmetic (bench/hosts-figures.ts): its options, which
// steps it times, the slower host's median, the all-reduce time at line rate
// and the lower bound max(compute, comm). The runs themselves need root and
// network namespaces: `npm run bench -- hosts`.
import t from 'tap';
import {
  bitsPerSecondOf,
  DEFAULT_SCHEDULES,
  HOOKS,
  lineRateAllReduceMs,
  lowerBoundMs,
  median,
  parseHostsOptions,
  scheduleRun,
  slowerHostMedian,
  untimedSteps,
  type HostsRow,
} from '../bench/hosts-figures.js';
import { secretOverhead, secretRounds } from '../bench/hosts-secret.js';
import { candidateKey } from '../src/profiling/auto-candidates.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';

t.test('options: defaults, lists, refusals naming the flag', async t => {
  t.same(parseHostsOptions({}), {
    models: ['alexnet-mini', 'alexnet'],
    rates: undefined,
    steps: undefined,
    batch: undefined,
    out: 'bench/results',
    schedules: [...DEFAULT_SCHEDULES],
    hooks: [...HOOKS],
    torch: true,
    quick: false,
    secret: ['with'],
    secretRounds: 1,
  });
  const o = parseHostsOptions({
    models: 'alexnet-mini',
    rates: '1gbit, 100mbit',
    steps: '12',
    batch: '16',
    out: '/tmp/x',
  });
  t.same(o, {
    models: ['alexnet-mini'],
    rates: ['1gbit', '100mbit'],
    steps: 12,
    batch: 16,
    out: '/tmp/x',
    schedules: [...DEFAULT_SCHEDULES],
    hooks: [...HOOKS],
    torch: true,
    quick: false,
    secret: ['with'],
    secretRounds: 1,
  });
  const q = parseHostsOptions({ models: 'alexnet-mini', links: '1G,100M', quick: true, schedules: 'sequential,auto' });
  t.same(
    [q.rates, q.schedules, q.hooks, q.torch],
    [['1gbit', '100mbit'], ['sequential', 'auto'], ['none', 'fp16'], false],
    '--links 1G,100M --quick',
  );
  t.throws(() => parseHostsOptions({ schedules: 'fastest' }), /unknown schedule 'fastest' \(--schedules/);
  t.throws(() => parseHostsOptions({ hooks: 'int8' }), /unknown hook 'int8' \(--hooks/);
  t.throws(() => parseHostsOptions({ models: 'resnet' }), /unknown model 'resnet' \(--models/);
  t.throws(() => parseHostsOptions({ rates: '1gbps' }), /link rate '1gbps' \(--rates/);
  t.throws(() => parseHostsOptions({ steps: '3' }), /--steps must be an integer >= 4/);
  const b = parseHostsOptions({ secret: 'both', repeats: '4' });
  t.same([b.secret, b.secretRounds], [['with', 'without'], 4], '--secret both --repeats 4');
  t.same(parseHostsOptions({ secret: 'without' }).secret, ['without']);
  t.throws(() => parseHostsOptions({ secret: 'maybe' }), /--secret takes with, without or both, got 'maybe'/);
});

t.test('the secret rounds take turns, pool each mode and pair the rows', async t => {
  const order: string[] = [];
  let n = 0;
  const runs = await secretRounds(['with', 'without'], 3, async secret => {
    order.push(secret);
    n++;
    return { hostsMs: [[n, n], [n + 10]], parameters: 7 };
  });
  t.same(order, ['with', 'without', 'without', 'with', 'with', 'without']);
  t.same(
    runs[0].times.hostsMs,
    [
      [1, 1, 4, 4, 5, 5],
      [11, 14, 15],
    ],
    'with: every round pooled per host',
  );
  t.same(runs[1].roundsMs, [12, 13, 16], 'without: each round its slower host');
  const row = (schedule: string, secret: 'with' | 'without', stepMs: number): HostsRow => ({
    model: 'alexnet-mini',
    link: '1gbit',
    kind: 'tandem',
    schedule,
    stepMs,
    hostsMs: [],
    secret,
  });
  const pairs = secretOverhead([row('buckets', 'with', 51), row('buckets (without secret)', 'without', 50)]);
  t.same(
    pairs.map(p => [p.schedule, p.ratio]),
    [['buckets', 51 / 50]],
  );
});

t.test("each schedule's flags give the configuration its prediction's key names", async t => {
  for (const schedule of DEFAULT_SCHEDULES) {
    if (schedule === 'auto') continue;
    for (const hook of HOOKS) {
      const run = scheduleRun(schedule, hook, 2);
      const c = parseTrainArgs(run.args, 'train').config;
      const key = candidateKey({
        strategy: c.strategy as 'sequential',
        forwardWait: c.forwardWait ?? 'group',
        exchangeOrder: c.exchangeOrder ?? 'ready',
        chunkFloats: c.chunkFloats,
        commHook: (c.commHook ?? 'none') as 'none',
      });
      t.equal(run.key, key, `${schedule} + ${hook}: ${run.args.join(' ')}`);
    }
  }
});

t.test('timed steps: the first third untimed, at least one', async t => {
  t.equal(untimedSteps(12), 4);
  t.equal(untimedSteps(8), 3);
  t.equal(untimedSteps(4), 2);
  t.equal(untimedSteps(1), 1);
});

t.test('medians: odd, even, the slower host', async t => {
  t.equal(median([5, 1, 3]), 3);
  t.equal(median([4, 1, 3, 2]), 2.5);
  t.throws(() => median([]));
  t.equal(
    slowerHostMedian([
      [10, 30, 20],
      [25, 5, 26],
    ]),
    25,
  );
});

t.test('line rate and lower bound', async t => {
  t.equal(bitsPerSecondOf('100mbit'), 1e8);
  t.equal(bitsPerSecondOf('10gbit'), 1e10);
  // 2 hosts: each sends half the gradient in the reduce-scatter and half in the all-gather, the whole gradient in all
  const floats = 586_250;
  t.ok(Math.abs(lineRateAllReduceMs(floats, 1e9) - ((floats * 32) / 1e9) * 1000) < 1e-9);
  // 4 hosts: 3/4 of it twice
  t.ok(Math.abs(lineRateAllReduceMs(1000, 1e6, 4) - ((1.5 * 1000 * 32) / 1e6) * 1000) < 1e-9);
  t.equal(lowerBoundMs(65, 33), 65);
  t.equal(lowerBoundMs(65, 330), 330);
});
