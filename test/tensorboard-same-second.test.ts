// TensorBoard event files whose plain name (`events.out.tfevents.<seconds>.<hostname>`) is taken — another writer of
// the same second, e.g. two `model.fit` calls with `tensorBoard(dir)` in a row — are written under the next free name
// (`….<pid>.<n>`), read back by the independent decoder (test/fixtures/read-tfevents.py), and the file of the other
// writer is left as it was. The plain names of every second around the test are taken beforehand, so the clash is
// certain whatever the clock says.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { tensorBoard } from '../src/index.js';
import { f32, missingDecoder, PYTHON, READER, valuesOf, type Decoded } from './fixtures/tfevents-decoder.js';

const OTHER = 'another writer of the same second';

const missing = missingDecoder();
if (missing && process.env.TANDEM_REQUIRE_TENSORBOARD === '1') t.fail(`TANDEM_REQUIRE_TENSORBOARD=1 but ${missing}`);
else if (missing) t.plan(0, `skipped: ${missing}`);
else {
  t.test('two model.fit calls with tensorBoard(dir), every plain name taken: two more event files', async t => {
    await tf.setBackend('cpu');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tb-second-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const train = path.join(dir, 'train');
    mkdirSync(train);
    const now = Math.floor(Date.now() / 1000);
    const planted = Array.from({ length: 600 }, (_, i) => `events.out.tfevents.${now - 5 + i}.${os.hostname()}`);
    for (const name of planted) writeFileSync(path.join(train, name), OTHER);

    const x = tf.tensor2d(
      Array.from({ length: 64 }, (_, i) => (i % 7) / 7 - 0.5),
      [16, 4],
    );
    const y = tf.tensor2d(
      Array.from({ length: 16 }, (_, i) => (i % 3) / 3),
      [16, 1],
    );
    const model = tf.sequential({ layers: [tf.layers.dense({ inputShape: [4], units: 1 })] });
    model.compile({ optimizer: 'sgd', loss: 'meanSquaredError' });
    const losses: number[][] = [];
    for (let fit = 0; fit < 2; fit++) {
      const history = await model.fit(x, y, { epochs: 2, batchSize: 8, callbacks: [tensorBoard(dir)] });
      losses.push(history.history.loss as number[]);
    }
    tf.dispose([x, y]);
    model.dispose();

    t.ok(
      planted.every(name => readFileSync(path.join(train, name), 'utf8') === OTHER),
      "the other writer's files are untouched",
    );
    const written = readdirSync(train)
      .filter(f => !planted.includes(f))
      .sort();
    t.equal(written.length, 2, `one event file per fit (${written.join(', ')})`);
    for (const [i, file] of written.entries()) {
      t.match(file, new RegExp(`^events\\.out\\.tfevents\\.\\d+\\.${os.hostname()}\\.${process.pid}\\.\\d+$`));
      const decoded = JSON.parse(
        execFileSync(PYTHON, [READER, path.join(train, file)], { encoding: 'utf8' }),
      ) as Decoded;
      t.equal(decoded.file_version, 'brain.Event:2');
      t.same(
        valuesOf(decoded, 'batch_loss').map(([step]) => step),
        [1, 2, 3, 4],
        `${file}: its fit's 4 batches`,
      );
      t.same(
        valuesOf(decoded, 'epoch_loss'),
        losses[i].map((loss, e) => [e + 1, f32(loss)]),
        `${file}: its fit's epoch losses`,
      );
    }
  });
}
