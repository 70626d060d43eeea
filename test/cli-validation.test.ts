// `tandem train --validation-split F`: the last fraction of the samples evaluated at every epoch's end across the
// devices; its val_loss and val_acc (and the epochs' loss and acc) equal tfjs's own `model.fit` with the same
// validationSplit and shuffle false on one engine (relative 1e-4), in the epoch lines and in summary.json's epochs.
// `--early-stopping MONITOR:PATIENCE` stops after the epoch tfjs's earlyStopping stops after, on the same logs.
import t, { type Test } from 'tap';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { runTandem } from './fixtures/cli-process.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { modelArtifacts, writeModelFiles } from '../src/actors/model-files.js';
import { fileModelHandler } from '../src/model/file-model-handler.js';
import { resolveConfig } from '../src/config.js';
import { fit } from '../src/index.js';
import type { TrainConfig } from '../src/config-types.js';

const SIZE = 50;
const CLASSES = 3;
/** A dataset module: 4 features in [-1, 1], the class of the largest of three sums. */
const DATA = `
const feature = (i, k) => (((Math.imul(i * 7 + k * 13 + 1, 2654435761) >>> 0) % 2001) / 1000) - 1;
export default () => ({
  size: ${SIZE}, sampleShape: [4], classes: ${CLASSES},
  read(index, out, offset) {
    for (let k = 0; k < 4; k++) out[offset + k] = feature(index, k);
    const s = [out[offset] + out[offset + 1], out[offset + 2] - out[offset], out[offset + 3] * 0.5];
    return s.indexOf(Math.max(...s));
  },
});`;

function samples(): { x: tf.Tensor; y: tf.Tensor } {
  const feature = (i: number, k: number) => ((Math.imul(i * 7 + k * 13 + 1, 2654435761) >>> 0) % 2001) / 1000 - 1;
  const xs: number[][] = [];
  const ys: number[] = [];
  for (let i = 0; i < SIZE; i++) {
    const f = [0, 1, 2, 3].map(k => Math.fround(feature(i, k)));
    const s = [f[0] + f[1], f[2] - f[0], f[3] * 0.5];
    xs.push(f);
    ys.push(s.indexOf(Math.max(...s)));
  }
  return { x: tf.tensor2d(xs), y: tf.tensor1d(ys) };
}

function model(): tf.Sequential {
  const m = tf.sequential();
  m.add(
    tf.layers.dense({
      inputShape: [4],
      units: 8,
      activation: 'relu',
      kernelInitializer: tf.initializers.glorotUniform({ seed: 3 }),
    }),
  );
  m.add(
    tf.layers.dense({
      units: CLASSES,
      activation: 'softmax',
      kernelInitializer: tf.initializers.glorotUniform({ seed: 4 }),
    }),
  );
  return m;
}

async function setUp(t: Test) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tandem-cli-validation-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const m = model();
  const modelJson = await writeModelFiles(path.join(dir, 'model'), await modelArtifacts(tf, m));
  const data = path.join(dir, 'data.mjs');
  await writeFile(data, DATA);
  return { dir, m, modelJson, data };
}

const flags = (modelJson: string, data: string, out: string, epochs: number) =>
  [
    'train',
    '--model',
    modelJson,
    '--data',
    data,
    '--loss',
    'categorical',
    '--optimizer',
    'sgd',
    '--lr',
    '0.5',
    '--momentum',
    '0',
  ]
    .concat(['--devices', '2', '--batch', '8', '--epochs', String(epochs), '--no-shuffle', '--partial-batch'])
    .concat(['--validation-split', '0.2', '--backend', 'cpu', '--out', out]);

/** tfjs's own model.fit on one engine, as the CLI is asked to train: its History. */
async function reference(m: tf.Sequential, epochs: number, lr = 0.5, callbacks: tf.Callback[] = []) {
  m.compile({ optimizer: tf.train.sgd(lr), loss: 'sparseCategoricalCrossentropy', metrics: ['acc'] });
  const { x, y } = samples();
  const history = await m.fit(x, y, {
    epochs,
    batchSize: 8,
    validationSplit: 0.2,
    shuffle: false,
    verbose: 0,
    callbacks,
  });
  tf.dispose([x, y]);
  return history;
}

function close(t: Test, got: number, want: number, what: string) {
  t.ok(Math.abs(got - want) <= 1e-4 * Math.max(1, Math.abs(want)), `${what}: ${got} vs tfjs ${want}`);
}

t.test('--validation-split 0.2 --epochs 2: val_loss and val_acc equal tfjs model.fit', async t => {
  const { dir, m, modelJson, data } = await setUp(t);
  const out = path.join(dir, 'out');
  const run = await runTandem(flags(modelJson, data, out, 2));
  if (run.code !== 0) throw new Error(`tandem exited ${run.code}\n${run.stdout}\n${run.stderr}`);
  const lines = run.stdout.split('\n').filter(l => /^epoch \d+\/\d+ {2}/.test(l));
  t.equal(lines.length, 2, 'one line per epoch');
  for (const line of lines)
    t.match(
      line,
      /^epoch \d\/2 {2}loss \d+\.\d{4} {2}acc \d\.\d{3} {2}val_loss \d+\.\d{4} {2}val_acc \d\.\d{3} {2}\d+\.\d s$/,
    );
  const summary = JSON.parse(await readFile(path.join(out, 'summary.json'), 'utf8')) as {
    epochs: Record<string, number>[];
  };
  const history = await reference(m, 2);
  t.equal(summary.epochs.length, 2);
  for (const [e, logs] of summary.epochs.entries()) {
    t.equal(logs.epoch, e + 1);
    for (const key of ['loss', 'acc', 'val_loss', 'val_acc'])
      close(t, logs[key], history.history[key][e] as number, `epoch ${e + 1} ${key}`);
    t.match(lines[e], ` val_loss ${logs.val_loss.toFixed(4)}  val_acc ${logs.val_acc.toFixed(3)} `);
  }
});

t.test('--early-stopping val_loss:1 stops where tfjs earlyStopping stops; --keep-best 2 keeps the 2 best', async t => {
  const { dir, m, modelJson, data } = await setUp(t);
  const out = path.join(dir, 'out');
  const args = flags(modelJson, data, out, 8).map(a => (a === '0.5' ? '2' : a)); // lr 2: val_loss turns up early
  const run = await runTandem([...args, '--early-stopping', 'val_loss:1', '--keep-best', '2']);
  if (run.code !== 0) throw new Error(`tandem exited ${run.code}\n${run.stdout}\n${run.stderr}`);
  const summary = JSON.parse(await readFile(path.join(out, 'summary.json'), 'utf8')) as {
    epochs: Record<string, number>[];
    earlyStop: { epoch: number; bestEpoch: number };
    bestEpochs: { epoch: number; value: number; dir: string }[];
  };
  const epochs = summary.epochs.length;
  t.ok(epochs < 8, `stopped early, after epoch ${epochs} of 8`);
  t.equal(summary.earlyStop.epoch, epochs);
  t.match(run.stdout, `early stopping after epoch ${epochs}: best val_loss`);
  // tfjs's own model.fit with tf.callbacks.earlyStopping stops after the same epoch
  const history = await reference(m, 8, 2, [tf.callbacks.earlyStopping({ monitor: 'val_loss', patience: 1 })]);
  t.equal(history.epoch.length, epochs, 'tfjs model.fit + earlyStopping ran as many epochs');
  // and tfjs's EarlyStopping fed the CLI's own logs stops after that epoch too
  const stopper = tf.callbacks.earlyStopping({ monitor: 'val_loss', patience: 1 });
  const probe = model();
  probe.compile({ optimizer: 'sgd', loss: 'sparseCategoricalCrossentropy' });
  stopper.setModel(probe);
  await stopper.onTrainBegin();
  let stoppedAfter = 0;
  for (const [e, logs] of summary.epochs.entries()) {
    await stopper.onEpochEnd(e, logs);
    if (probe.stopTraining && stoppedAfter === 0) stoppedAfter = e + 1;
  }
  t.equal(stoppedAfter, epochs, "tfjs's EarlyStopping on the CLI's logs stops after the same epoch");
  // the 2 best epochs by val_loss, each folder the model of that epoch (its val_loss again on the last 20%)
  const ranked = [...summary.epochs].sort((a, b) => a.val_loss - b.val_loss || a.epoch - b.epoch).slice(0, 2);
  t.same(
    summary.bestEpochs.map(k => k.epoch),
    ranked.map(r => r.epoch),
  );
  const { x, y } = samples();
  const [valX, valY] = [x.slice(40, 10), y.slice(40, 10)];
  const folders = (await readdir(path.join(out, 'best'))).filter(f => f !== 'kept.json'); // the list resume reads
  t.same(folders.sort(), ranked.map(r => `epoch-${r.epoch}`).sort());
  for (const kept of summary.bestEpochs) {
    const loaded = await tf.loadLayersModel(fileModelHandler(path.join(kept.dir, 'model.json')));
    loaded.compile({ optimizer: 'sgd', loss: 'sparseCategoricalCrossentropy' });
    const loss = loaded.evaluate(valX, valY, { batchSize: 8 }) as tf.Scalar;
    close(t, loss.dataSync()[0], kept.value, `epoch ${kept.epoch}'s kept model's val_loss`);
    tf.dispose([loss]);
    loaded.dispose();
  }
  tf.dispose([x, y, valX, valY]);
});

t.test('refused before any thread starts, naming the option and the fix', async t => {
  const base = { model: 'mlp', data: 'synthetic-images', datasetSize: 64, imageSize: [8, 8, 1], batch: 8, devices: 2 };
  const cases: [string, TrainConfig, RegExp][] = [
    ['a split outside (0, 1)', { ...base, validationSplit: 1 }, /validationSplit.*fraction in \(0, 1\)/],
    ['a split and heldOut', { ...base, validationSplit: 0.2, heldOut: 8 }, /validationSplit.*give one of them/],
    ['no MONITOR:PATIENCE', { ...base, earlyStopping: 'val_loss' }, /earlyStopping.*MONITOR:PATIENCE/],
    ['a val_ monitor without a split', { ...base, earlyStopping: 'val_loss:2' }, /add --validation-split F/],
    ['an unknown monitor', { ...base, validationSplit: 0.25, earlyStopping: 'val_f1:2' }, /they have loss, acc/],
    ['keepBest without out', { ...base, validationSplit: 0.25, keepBest: 2 }, /no --out was given: add --out DIR/],
    ['another method', { ...base, method: 'local-head', validationSplit: 0.25 }, /data-parallel training/],
  ];
  for (const [what, config, message] of cases)
    await t.rejects(resolveConfig(config), { name: 'TandemError', code: 'BAD_CONFIG', message }, what);
});

if (glooAddonOrSkip())
  t.test('launch --hosts 2 --devices 1: each host validates its share, the logs equal tfjs model.fit', async t => {
    const { dir, m, modelJson, data } = await setUp(t);
    const out = path.join(dir, 'out');
    const train = flags(modelJson, data, out, 2).slice(1);
    train.splice(train.indexOf('--devices'), 2);
    const run = await runTandem(['launch', '--hosts', '2', '--devices', '1', ...train]);
    if (run.code !== 0) throw new Error(`tandem launch exited ${run.code}\n${run.stdout}\n${run.stderr}`);
    const summary = JSON.parse(await readFile(path.join(out, 'summary.json'), 'utf8')) as {
      epochs: Record<string, number>[];
    };
    const history = await reference(m, 2);
    t.equal(summary.epochs.length, 2);
    for (const [e, logs] of summary.epochs.entries())
      for (const key of ['loss', 'acc', 'val_loss', 'val_acc'])
        close(t, logs[key], history.history[key][e] as number, `epoch ${e + 1} ${key}`);
  });

t.test("fit refuses the CLI's earlyStopping and keepBest, naming the callbacks that do it", async t => {
  const m = model();
  m.compile({ optimizer: 'sgd', loss: 'sparseCategoricalCrossentropy' });
  const { x, y } = samples();
  await t.rejects(fit(m, x, y, { earlyStopping: 'val_loss:2' }), {
    code: 'BAD_CONFIG',
    message:
      /^fit: earlyStopping is tandem train's option; give fit callbacks: \[earlyStopping\(\{ monitor, patience \}\)\]/,
  });
  await t.rejects(fit(m, x, y, { keepBest: 2 }), {
    code: 'BAD_CONFIG',
    message: /^fit: keepBest .*callbacks: \[bestCheckpoints\(\{ dir, keep, monitor \}\)\]/,
  });
  tf.dispose([x, y]);
});
