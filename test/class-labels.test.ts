// A classifier's labels are integer classes in [0, classes). A user's dataset
// that returns float targets (a regression) without loss 'mse', or says it has
// one class, is refused before any thread with the way out (--loss mse); a
// float label past sample 0 is named at loading with the same way out.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, type TrainConfig } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-class-labels-'));
const regression = fileURLToPath(new URL('../../test/fixtures/regression.mjs', import.meta.url));
const regressor = path.join(dir, 'regressor.mjs');
writeFileSync(
  regressor,
  'export default (tf, { inputShape, seed }) => tf.sequential({ layers: [tf.layers.dense({ inputShape, units: 1, ' +
    'kernelInitializer: tf.initializers.glorotUniform({ seed }) })] });',
);
const base: TrainConfig = { model: regressor, data: regression, devices: 2, batch: 8, steps: 2, backend: 'cpu' };

/** A data module of 3 classes whose sample `at` has the label `label`. */
function labelled(name: string, at: number, label: number): string {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `export default () => ({ size: 32, sampleShape: [2, 2, 1], classes: 3,
    read(index, out) { out.fill(index / 32); return index === ${at} ? ${label} : index % 3; } });`,
  );
  return file;
}

t.test('one class without loss mse: refused before any thread, naming --loss mse', async t => {
  for (const loss of [undefined, 'categorical'] as const) {
    const before = osThreads();
    await t.rejects(
      train({ ...base, loss }),
      {
        code: 'BAD_CONFIG',
        message:
          /config\.loss: data '.*regression\.mjs' has 1 class.*cross-entropy over a single class is 0.*give loss 'mse' \(--loss mse\)/,
      },
      `loss ${loss ?? 'read from the model'}`,
    );
    t.equal(osThreads(), before, 'no thread started');
  }
  const run = await train({ ...base, loss: 'mse' });
  t.equal(run.steps, 2, 'with loss mse the same data trains');
});

t.test(
  'a float label at sample 0: refused before any thread; later: named at loading; both say --loss mse',
  async t => {
    const before = osThreads();
    await t.rejects(train({ ...base, model: 'mlp', data: labelled('first', 0, 0.5) }), {
      code: 'BAD_DATA',
      message:
        /first\.mjs: read\(0, out, offset\) returned label 0\.5, not a class \(labels are integers in \[0, 3\)\); .*--loss mse/,
    });
    t.equal(osThreads(), before, 'no thread started');
    // Batch 32 = the whole dataset: sample 21 is in the first batch.
    await t.rejects(train({ ...base, model: 'mlp', data: labelled('later', 21, 1.5), batch: 32, steps: 1 }), {
      code: 'DATA_FAILED',
      message: /sample 21 has label 1\.5, not a class \(labels are integers in \[0, 3\)\); .*--loss mse/,
    });
    await t.rejects(train({ ...base, model: 'mlp', data: labelled('range', 21, 3), batch: 32, steps: 1 }), {
      code: 'DATA_FAILED',
      message: /range\.mjs: sample 21 has label 3, outside \[0, 3\)$/,
    });
  },
);
