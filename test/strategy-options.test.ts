// A strategy's own options given with another strategy are refused, naming the strategy they apply to (they were
// ignored unsaid: `--split-layer 1` trained sequential); with their own strategy they train, and two-group takes the
// split given.
import t from 'tap';
import { runTandem } from './fixtures/cli-process.js';
import { train } from '../src/index.js';
import type { TrainConfig } from '../src/config-types.js';

const BASE = ['train', '--model', 'mlp', '--data', 'mnist', '--backend', 'cpu', '--steps', '1', '--quiet'];

t.test('a strategy option with another strategy is BAD_CONFIG naming its strategy, before any thread', async t => {
  const cases: [string[], RegExp][] = [
    [
      ['--split-layer', '1'],
      /--split-layer \(config\.splitLayer\): applies to strategy 'two-group' only, not 'sequential'/,
    ],
    [['--split-layer', '1', '--strategy', 'auto'], /splitLayer.*not 'auto' \(auto picks the split from the profile\)/],
    [['--bucket-mb', '1', '--strategy', 'per-layer'], /--bucket-mb.*'buckets' or 'auto' only, not 'per-layer'/],
    [['--first-bucket-mb', '1', '--strategy', 'two-group'], /--first-bucket-mb.*not 'two-group'/],
    [['--time-share', '0.5'], /--time-share.*applies to strategy 'auto' only.*tandem profile takes it too/],
    [['--param-share', '0.5', '--strategy', 'buckets'], /--param-share.*'auto' only, not 'buckets'/],
  ];
  for (const [flags, message] of cases) {
    const { code, stderr } = await runTandem([...BASE, ...flags]);
    t.equal(code, 1, flags.join(' '));
    t.match(stderr, message, flags.join(' '));
    t.notMatch(stderr, /\n\s+at /, `${flags.join(' ')}: no stack trace`);
  }
});

t.test('with their own strategy they are used: two-group at the split given, buckets by the caps', async t => {
  const base: TrainConfig = { model: 'mlp', data: 'mnist', backend: 'cpu', devices: 2, steps: 1 };
  const twoGroup = await train({ ...base, strategy: 'two-group', splitLayer: 1 });
  t.equal(twoGroup.strategy.groups.length, 2);
  const buckets = await train({ ...base, strategy: 'buckets', bucketCapMB: 0.01, firstBucketMB: 0.01 });
  t.ok(
    buckets.strategy.groups.length > 1,
    `${buckets.strategy.groups.length} buckets of 0.01 MB (the default 0.5 MB: one)`,
  );
});
