// TensorBoard event files read back by an independent decoder (test/fixtures/read-tfevents.py: Debian's
// python3-protobuf and python3-crc32c, TensorFlow's Event/Summary fields; not tandem's writer run backwards): a real
// `tandem train --tensorboard DIR` has every per-step loss and accuracy of its summary.json and the epoch means, a
// `tandem train --validation-split` has each epoch's val_ logs in DIR/val, a
// `fit` with `tensorBoard(dir)` has its batch logs, its history and its validation metrics in DIR/val, and one
// corrupted byte fails the decoder's CRC check (so the comparison can fail).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { fit, overlapShare, spansFromChromeTrace, tensorBoard } from '../src/index.js';
import { runTandem } from './fixtures/cli-process.js';
import { smallRunArgs } from './fixtures/small-run.js';
import { FIT_CASES } from './fixtures/fit-models.js';
import { decodeDir, f32, missingDecoder, PYTHON, READER, valuesOf, type Decoded } from './fixtures/tfevents-decoder.js';

const scratch = () => mkdtempSync(path.join(os.tmpdir(), 'tandem-tb-'));

const missing = missingDecoder();
if (missing && process.env.TANDEM_REQUIRE_TENSORBOARD === '1') t.fail(`TANDEM_REQUIRE_TENSORBOARD=1 but ${missing}`);
else if (missing) t.plan(0, `skipped: ${missing}`);
else {
  t.test('tandem train --tensorboard: every step and epoch scalar as the run reported it', async t => {
    const dir = scratch();
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const board = path.join(dir, 'tb'),
      out = path.join(dir, 'out');
    const args = [
      'train',
      ...smallRunArgs({ seed: 3, steps: 16, strategy: 'two-group' }),
      '--devices',
      '2',
      '--backend',
      'cpu',
    ];
    const run = await runTandem([...args, '--out', out, '--tensorboard', board, '--quiet']);
    t.equal(run.code, 0, run.stderr);
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as {
      history: { step: number; loss: number; accuracy: number }[];
      config: { optimizer: { lr: number } };
      parameters: number;
      timings: { meanLoadWaitMs: number };
    };
    t.equal(summary.history.length, 16);
    const { file, decoded } = decodeDir(path.join(board, 'train'));
    t.match(path.basename(file), new RegExp(`^events\\.out\\.tfevents\\.\\d+\\.${os.hostname()}$`));
    t.equal(decoded.file_version, 'brain.Event:2');
    t.same(
      valuesOf(decoded, 'batch_loss'),
      summary.history.map(h => [h.step, f32(h.loss)]),
    );
    t.same(
      valuesOf(decoded, 'batch_acc'),
      summary.history.map(h => [h.step, f32(h.accuracy)]),
    );
    const epochs = [1, 2].map(e => summary.history.slice((e - 1) * 8, e * 8));
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    t.same(
      valuesOf(decoded, 'epoch_loss'),
      epochs.map((hs, i) => [i + 1, f32(mean(hs.map(h => h.loss)))]),
    );
    t.same(
      valuesOf(decoded, 'learning_rate'),
      summary.history.map(h => [h.step, f32(summary.config.optimizer.lr)]),
      'the learning rate of every step (no schedule: the constant lr)',
    );
    t.same(
      valuesOf(decoded, 'epoch_learning_rate'),
      [1, 2].map(e => [e, f32(summary.config.optimizer.lr)]),
      "each epoch's learning rate, as Keras's TensorBoard callback tags it",
    );
    for (const tag of ['samples_per_second', 'step_ms', 'compute_ms/device_0', 'compute_ms/device_1']) {
      const got = valuesOf(decoded, tag);
      t.equal(got.length, 16, `${tag} every step`);
      t.ok(
        got.every(([, v]) => Number.isFinite(v) && v > 0),
        `${tag} positive`,
      );
    }

    // Each device's exchange time per step: its exchange spans of the step, as the run's own trace has them (µs).
    const trace = JSON.parse(readFileSync(path.join(out, 'trace.json'), 'utf8')) as {
      traceEvents: { cat?: string; ph: string; pid: number; dur?: number; args?: { step?: number } }[];
    };
    for (const device of [0, 1]) {
      const fromTrace = new Map<number, number>();
      for (const e of trace.traceEvents)
        if (e.ph === 'X' && e.cat === 'exchange' && e.pid === device)
          fromTrace.set(e.args!.step!, (fromTrace.get(e.args!.step!) ?? 0) + e.dur! / 1000);
      const got = valuesOf(decoded, `exchange_ms/device_${device}`);
      t.equal(got.length, 16, `exchange_ms/device_${device} every step`);
      t.ok(
        got.every(([step, v]) => v > 0 && Math.abs(v - (fromTrace.get(step) ?? 0)) < 0.01),
        `exchange_ms/device_${device} is the trace's exchange time of each step`,
      );
    }

    // The step loop's wait for inputs, per step: its mean is the summary's.
    const waits = valuesOf(decoded, 'data_wait_ms');
    t.equal(waits.length, 16, 'data_wait_ms every step');
    t.ok(
      Math.abs(waits.reduce((s, [, v]) => s + v, 0) / 16 - summary.timings.meanLoadWaitMs) < 1e-3,
      `data_wait_ms's mean is the summary's meanLoadWaitMs (${summary.timings.meanLoadWaitMs.toFixed(3)} ms)`,
    );

    // The bytes each device handed to the exchange per step: with no comm hook, every parameter's gradient as float32.
    for (const device of [0, 1]) {
      const got = valuesOf(decoded, `exchange_bytes/device_${device}`);
      t.same(
        got.map(([, v]) => v),
        got.map(() => 4 * summary.parameters),
        `exchange_bytes/device_${device}: 4 bytes per parameter every step (${summary.parameters} parameters)`,
      );
      t.equal(got.length, 16, `exchange_bytes/device_${device} every step`);
    }

    // The overlap share of each step: the timeline picture's count over the trace's spans of that step.
    const spans = spansFromChromeTrace(trace as unknown as Parameters<typeof spansFromChromeTrace>[0]);
    const overlap = valuesOf(decoded, 'overlap_share');
    t.equal(overlap.length, 16, 'overlap_share every step');
    t.ok(
      overlap.every(([step, v]) => Math.abs(v - f32(overlapShare(spans.filter(s => s.step === step)))) < 1e-3),
      "overlap_share is the trace's share of each step's exchange under backward",
    );
    t.ok(
      overlap.every(([, v]) => v >= 0 && v <= 1),
      `a share (${overlap.map(([, v]) => v.toFixed(2)).join(' ')})`,
    );

    // The decoder can fail: one flipped byte in the last record, and the file no longer reads.
    const blob = readFileSync(file);
    blob[blob.length - 6] ^= 0x01;
    const bad = path.join(dir, 'corrupt.tfevents');
    writeFileSync(bad, blob);
    const check = spawnSync(PYTHON, [READER, bad], { encoding: 'utf8' });
    t.equal(check.status, 2, 'a corrupted byte fails the CRC check');
    t.match(check.stderr, /data CRC mismatch/);

    // A writer killed within its last record: that record fails, every one before it still reads.
    const cut = path.join(dir, 'truncated.tfevents');
    writeFileSync(cut, readFileSync(file).subarray(0, -5));
    const partial = spawnSync(PYTHON, [READER, cut], { encoding: 'utf8' });
    t.equal(partial.status, 2, 'a truncated last record is reported');
    const before = JSON.parse(partial.stdout) as Decoded & { error: string };
    t.match(before.error, /truncated record/);
    t.equal(before.records, decoded.records - 1, 'the records before it are read');
    t.same(before.scalars, decoded.scalars.slice(0, before.scalars.length));
    t.ok(before.scalars.length > 0 && before.scalars.length < decoded.scalars.length);
  });

  t.test(
    "tandem train --validation-split --tensorboard: each epoch's val_ logs in DIR/val as epoch_<name>",
    async t => {
      const dir = scratch();
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const board = path.join(dir, 'tb'),
        out = path.join(dir, 'out');
      const run = await runTandem([
        'train',
        ...smallRunArgs({ seed: 3 }),
        ...['--epochs', '2', '--validation-split', '0.25', '--devices', '2', '--backend', 'cpu'],
        ...['--out', out, '--tensorboard', board, '--quiet'],
      ]);
      t.equal(run.code, 0, run.stderr);
      const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as {
        epochs: ({ epoch: number } & Record<string, number>)[];
      };
      t.equal(summary.epochs.length, 2, 'two epochs in summary.json');
      const val = decodeDir(path.join(board, 'val')).decoded;
      for (const name of ['loss', 'acc'])
        t.same(
          valuesOf(val, `epoch_${name}`),
          summary.epochs.map(e => [e.epoch, f32(e[`val_${name}`])]),
          `epoch_${name} in val: the epochs' val_${name}`,
        );
      t.equal(valuesOf(val, 'batch_loss').length, 0, 'no batch scalars for validation');
      t.equal(valuesOf(decodeDir(path.join(board, 'train')).decoded, 'epoch_val_loss').length, 0, 'none in train');
    },
  );

  t.test('fit with tensorBoard(dir): batch and epoch logs in DIR/train, val_ metrics in DIR/val', async t => {
    await tf.setBackend('cpu');
    const dir = scratch();
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const dense = FIT_CASES[0];
    const { x, y } = dense.data();
    const batches: { loss: number; acc: number }[] = [];
    const model = dense.make();
    const lr = model.optimizer.getConfig().learningRate as number;
    const history = await fit(model, x, y, {
      batchSize: 12,
      epochs: 2,
      validationSplit: 0.25,
      shuffle: false,
      verbose: 0,
      devices: 2,
      callbacks: [
        tensorBoard(dir),
        { onBatchEnd: async (_b: number, logs?: tf.Logs) => void batches.push({ loss: logs!.loss, acc: logs!.acc }) },
      ],
    });
    const train = decodeDir(path.join(dir, 'train')).decoded;
    t.same(
      valuesOf(train, 'batch_loss'),
      batches.map((b, i) => [i + 1, f32(b.loss)]),
    );
    t.same(
      valuesOf(train, 'batch_acc'),
      batches.map((b, i) => [i + 1, f32(b.acc)]),
    );
    t.same(
      valuesOf(train, 'epoch_loss'),
      (history.history.loss as number[]).map((v, i) => [i + 1, f32(v)]),
    );
    t.same(
      valuesOf(train, 'epoch_learning_rate'),
      [1, 2].map(e => [e, f32(lr)]),
      "the optimizer's learning rate each epoch, as Keras's TensorBoard callback tags it",
    );
    const val = decodeDir(path.join(dir, 'val')).decoded;
    t.same(
      valuesOf(val, 'epoch_loss'),
      (history.history.val_loss as number[]).map((v, i) => [i + 1, f32(v)]),
    );
    t.equal(valuesOf(val, 'batch_loss').length, 0, 'no batch scalars for validation');
  });

  t.test('an event file that cannot be written is a warning, and the run goes on', async t => {
    const dir = scratch();
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'a-file');
    writeFileSync(file, '');
    const args = ['train', ...smallRunArgs({ seed: 3, steps: 3 }), '--devices', '2', '--backend', 'cpu'];
    const run = await runTandem([...args, '--tensorboard', path.join(file, 'tb')]);
    t.equal(run.code, 0, run.stderr);
    t.match(run.stdout, /warning: tensorboard: cannot write .*a-file\/tb\/train.*ENOTDIR.*the run goes on without/);
    t.match(run.stdout, /without its event file \(a file stands where a directory of the path should be/, 'the fix');
    t.match(run.stdout, /done: 3 steps/);
  });

  t.test("fit refuses the 'tensorboard' option and names the callback", async t => {
    const { x, y } = FIT_CASES[0].data();
    const args = { epochs: 1, verbose: 0 as const, tensorboard: 'tb' } as Parameters<typeof fit>[3];
    await t.rejects(fit(FIT_CASES[0].make(), x, y, args), { code: 'BAD_CONFIG', message: /tensorBoard\(dir\)/ });
  });
}
