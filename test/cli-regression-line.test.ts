// `tandem train --loss mse` (a regression) prints no accuracy: neither on a
// step's line nor on the final `done:` line (it printed `batch accuracy NaN%`).
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { runTandem } from './fixtures/cli-process.js';

const data = fileURLToPath(new URL('../../test/fixtures/regression.mjs', import.meta.url));
const model = fileURLToPath(new URL('../../test/fixtures/models/regressor.mjs', import.meta.url));

t.test('a regression run prints its loss and no NaN accuracy', async t => {
  const run = await runTandem(
    ['train', '--model', model, '--data', data, '--loss', 'mse'].concat([
      '--devices',
      '2',
      '--batch',
      '8',
      '--steps',
      '2',
      '--backend',
      'cpu',
    ]),
  );
  if (run.code !== 0) throw new Error(`tandem exited ${run.code}\n${run.stderr}`);
  const stdout = run.stdout;
  const done = stdout.split('\n').find(l => l.startsWith('done:'));
  t.match(
    done,
    /^done: 2 steps on 2 device\(s\) \(cpu\), final loss \d+\.\d{4}, \d+ samples\/s$/,
    'the done line: loss, no accuracy',
  );
  t.notMatch(stdout, /NaN/, 'no NaN anywhere');
});
