// A run resumed into the same --tensorboard DIR, read back by the independent decoder (test/fixtures/read-tfevents.py)
// and merged as TensorBoard merges a run's files (in name order; a SessionLog.START event at step T drops the points
// at T and later read before it): every step once, in order, no gap. The first run wrote steps 11 and 12 after its
// last checkpoint (step 10); the resumed run writes them again, so without its START event at step 11 TensorBoard
// showed both and the curve went back from 12 to 11. An epoch (8 steps) the resumed run saw only the end of (epoch 2,
// steps 9-16, resumed at 11) gets no mean from it: it used to write the mean of steps 11-16 as epoch 2's.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { fit, tensorBoard } from '../src/index.js';
import { runTandem } from './fixtures/cli-process.js';
import { FIT_CASES } from './fixtures/fit-models.js';
import { smallRunArgs } from './fixtures/small-run.js';
import {
  decodeDir,
  decodeFile,
  f32,
  missingDecoder,
  valuesOf,
  type Decoded,
  type Scalar,
} from './fixtures/tfevents-decoder.js';

/** A run's files merged as TensorBoard's event accumulator does with purge_orphaned_data (its default). */
function merged(dir: string): { files: Decoded[]; scalars: Scalar[] } {
  const names = readdirSync(dir)
    .filter(f => f.startsWith('events.out.tfevents.'))
    .sort();
  const files = names.map(f => decodeFile(path.join(dir, f)));
  let scalars: Scalar[] = [];
  for (const file of files) {
    for (const start of file.session_starts) scalars = scalars.filter(([, step]) => step < start);
    scalars.push(...file.scalars);
  }
  return { files, scalars };
}

const missing = missingDecoder();
if (missing && process.env.TANDEM_REQUIRE_TENSORBOARD === '1') t.fail(`TANDEM_REQUIRE_TENSORBOARD=1 but ${missing}`);
else if (missing) t.plan(0, `skipped: ${missing}`);
else {
  t.test('--resume into the same DIR: each step once, in order, the resumed values after the checkpoint', async t => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tb-resume-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const board = path.join(dir, 'tb');
    const args = ['train', ...smallRunArgs({ seed: 3 }), '--devices', '2', '--backend', 'cpu', '--quiet'];
    const first = await runTandem(
      [...args, '--steps', '12', '--checkpoint-every', '5', '--out', path.join(dir, 'a')].concat([
        '--tensorboard',
        board,
      ]),
    );
    t.equal(first.code, 0, first.stderr);
    const out = path.join(dir, 'b');
    const resumed = await runTandem(
      [...args, '--steps', '24', '--resume', path.join(dir, 'a'), '--out', out].concat(['--tensorboard', board]),
    );
    t.equal(resumed.code, 0, resumed.stderr);

    const { files, scalars } = merged(path.join(board, 'train'));
    t.equal(files.length, 2, 'two event files: the first run and the resumed one');
    t.same(files[0].session_starts, [], 'the first run starts no session over');
    t.same(files[1].session_starts, [11], 'the resumed run starts at step 11 (its checkpoint was step 10)');
    const loss = scalars.filter(s => s[0] === 'batch_loss');
    t.same(
      loss.map(s => s[1]),
      Array.from({ length: 24 }, (_, i) => i + 1),
      'batch_loss at steps 1..24, each once, in order',
    );
    const historyOf = (run: string) =>
      (
        JSON.parse(readFileSync(path.join(run, 'summary.json'), 'utf8')) as {
          history: { step: number; loss: number }[];
        }
      ).history;
    const history = historyOf(out);
    t.same(
      loss.slice(10),
      history.filter(h => h.step > 10).map(h => ['batch_loss', h.step, f32(h.loss)]),
      "steps 11..24: the resumed run's values",
    );
    const meanOf = (h: { step: number; loss: number }[], from: number) =>
      f32(h.filter(x => x.step >= from && x.step < from + 8).reduce((sum, x) => sum + x.loss, 0) / 8);
    t.same(
      scalars.filter(s => s[0] === 'epoch_loss'),
      [
        ['epoch_loss', 1, meanOf(historyOf(path.join(dir, 'a')), 1)],
        ['epoch_loss', 3, meanOf(history, 17)],
      ],
      "epoch 1 from the first run, epoch 3 from the resumed one, and no mean of epoch 2's last steps as epoch 2's",
    );
  });

  t.test('fit({ initialEpoch }) with tensorBoard(dir): epochs and batches go on from the run before', async t => {
    await tf.setBackend('cpu');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tb-initial-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const dense = FIT_CASES[0];
    const { x, y } = dense.data();
    const args = { batchSize: 12, shuffle: false, verbose: 0 as const, devices: 2 };
    await fit(dense.make(), x, y, { ...args, epochs: 1, callbacks: [tensorBoard(path.join(dir, 'a'))] });
    const perEpoch = valuesOf(decodeDir(path.join(dir, 'a', 'train')).decoded, 'batch_loss').length;
    t.ok(perEpoch > 1, `${perEpoch} batches an epoch`);
    const callbacks = [tensorBoard(path.join(dir, 'b'))];
    await fit(dense.make(), x, y, { ...args, epochs: 3, initialEpoch: 1, callbacks });
    const resumed = decodeDir(path.join(dir, 'b', 'train')).decoded;
    t.same(
      valuesOf(resumed, 'epoch_loss').map(([step]) => step),
      [2, 3],
      'epochs 2 and 3',
    );
    t.same(
      valuesOf(resumed, 'batch_loss').map(([step]) => step),
      Array.from({ length: 2 * perEpoch }, (_, i) => perEpoch + i + 1),
      'the batches after the first epoch',
    );
  });
}
