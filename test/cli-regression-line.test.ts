// `tandem train --loss mse` (a regression) prints no accuracy: neither on a
// step's line nor on the final `done:` line (it printed `batch accuracy NaN%`).
import t from 'tap';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../../bin/tandem.js', import.meta.url));
const data = fileURLToPath(new URL('../../test/fixtures/regression.mjs', import.meta.url));
const model = fileURLToPath(new URL('../../test/fixtures/models/regressor.mjs', import.meta.url));

t.test('a regression run prints its loss and no NaN accuracy', async t => {
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [
        cli,
        'train',
        '--model',
        model,
        '--data',
        data,
        '--loss',
        'mse',
        '--devices',
        '2',
        '--batch',
        '8',
        '--steps',
        '2',
        '--backend',
        'cpu',
      ],
      (err, out, errOut) => (err ? reject(new Error(`${err.message}\n${errOut}`)) : resolve(out)),
    ),
  );
  const done = stdout.split('\n').find(l => l.startsWith('done:'));
  t.match(
    done,
    /^done: 2 steps on 2 device\(s\) \(cpu\), final loss \d+\.\d{4}, \d+ samples\/s$/,
    'the done line: loss, no accuracy',
  );
  t.notMatch(stdout, /NaN/, 'no NaN anywhere');
});
