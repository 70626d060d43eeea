// The optimizer a saved model.json was compiled with (trainingConfig.optimizer_config, src/optim/saved-optimizer.ts),
// computed two ways: every tfjs optimizer's own getClassName()/getConfig() read back into a train config, and the tfjs
// optimizer that config stands for gives the same getConfig() (a round trip through tandem's options); keras's
// spellings
// (snake_case, RMSprop's rho, SGD's nesterov) land on the same options; what tandem does not apply (amsgrad, a legacy
// learning-rate decay, Nadam) is refused naming the file. A run naming no optimizer trains with the saved one, the
// run's own hyper-parameters over the saved ones; one naming an optimizer ignores it.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { savedOptimizerFields } from '../src/optim/saved-optimizer.js';
import { resolveOptimizer } from '../src/optim/resolve-optimizer.js';
import { tfjsOptimizer } from '../src/optim/tfjs-optimizer.js';
import { resolveConfig, train } from '../src/index.js';

const TFJS = (): tf.Optimizer[] => [
  tf.train.sgd(0.03),
  tf.train.momentum(0.02, 0.8),
  tf.train.momentum(0.02, 0.7, true),
  tf.train.adam(0.004, 0.8, 0.99, 1e-6),
  tf.train.rmsprop(0.005, 0.85, 0.3, 1e-6, true),
  tf.train.adagrad(0.06, 0.2),
  tf.train.adamax(0.003, 0.85, 0.98, 1e-6, 0.1),
  tf.train.adadelta(0.5, 0.9, 1e-5),
];

t.test('every tfjs optimizer, saved and read back, is the same optimizer', async t => {
  for (const o of TFJS()) {
    const saved = { class_name: o.getClassName(), config: o.getConfig() };
    const again = tfjsOptimizer(tf, resolveOptimizer(savedOptimizerFields(JSON.parse(JSON.stringify(saved)))!));
    t.equal(again.getClassName(), o.getClassName(), `${o.getClassName()}: the class`);
    t.same(again.getConfig(), o.getConfig(), `${o.getClassName()}: ${JSON.stringify(o.getConfig())}`);
    again.dispose();
    o.dispose();
  }
  t.equal(savedOptimizerFields(undefined), undefined, 'no optimizer_config: none');
});

t.test("keras's spellings", async t => {
  t.same(
    savedOptimizerFields({
      class_name: 'Adam',
      config: { name: 'Adam', learning_rate: 0.01, decay: 0, beta_1: 0.8, beta_2: 0.99, epsilon: 1e-7, amsgrad: false },
    }),
    { optimizer: 'adam', lr: 0.01, beta1: 0.8, beta2: 0.99, epsilon: 1e-7 },
    'Adam: snake_case, an inert decay and amsgrad false',
  );
  t.same(
    savedOptimizerFields({
      class_name: 'RMSprop',
      config: { learning_rate: 0.001, rho: 0.8, momentum: 0, epsilon: 1e-7, centered: false, decay: 0 },
    }),
    { optimizer: 'rmsprop', lr: 0.001, decay: 0.8, momentum: 0, epsilon: 1e-7, centered: false },
    "RMSprop: keras's rho is tfjs's decay",
  );
  t.same(
    savedOptimizerFields({ class_name: 'SGD', config: { learning_rate: 0.1, momentum: 0.9, nesterov: true } }),
    { optimizer: 'sgd', lr: 0.1, momentum: 0.9, nesterov: true },
    'SGD with momentum and nesterov',
  );
  t.same(
    savedOptimizerFields({ class_name: 'SGD', config: { learningRate: 0.1 } }),
    { optimizer: 'sgd', lr: 0.1, momentum: 0 },
    "tfjs's SGD: plain, no momentum",
  );
  t.throws(
    () => savedOptimizerFields({ class_name: 'Adam', config: { learning_rate: 0.01, amsgrad: true } }),
    /Adam with amsgrad true, which tandem does not apply/,
  );
  t.throws(
    () => savedOptimizerFields({ class_name: 'Adam', config: { learning_rate: 0.01, decay: 0.01 } }),
    /Adam with decay 0.01, which tandem does not apply/,
  );
  // Keys of Object.prototype are no settings: refused as any other key tandem does not apply, never dropped.
  for (const key of ['constructor', '__proto__', 'valueOf', 'hasOwnProperty'])
    t.throws(
      () => savedOptimizerFields({ class_name: 'Adam', config: JSON.parse(`{"${key}": 1}`) as object }),
      new RegExp(`Adam with ${key} 1, which tandem does not apply`),
      key,
    );
  t.throws(
    () => savedOptimizerFields({ class_name: 'Nadam', config: {} }),
    /optimizer "Nadam", which tandem does not train with \(it trains with sgd, momentum, adam/,
  );
});

t.test('a run naming no optimizer trains with the saved one; its own settings win; naming one ignores it', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-saved-optimizer-'));
  const base = {
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    classes: 3,
    datasetSize: 48,
    batch: 8,
    steps: 2,
    seed: 2,
  };
  const first = await train({ ...base, model: 'mlp', devices: 1, steps: 1, optimizer: 'sgd', out: dir });
  const json = JSON.parse((await import('node:fs')).readFileSync(first.modelPath!, 'utf8')) as Record<string, unknown>;
  const compiled = (name: string, optimizer: tf.Optimizer) => {
    const file = path.join(dir, `${name}.json`); // weights.bin beside it
    writeFileSync(
      file,
      JSON.stringify({
        ...json,
        trainingConfig: {
          loss: 'sparseCategoricalCrossentropy',
          optimizer_config: { class_name: optimizer.getClassName(), config: optimizer.getConfig() },
        },
      }),
    );
    return file;
  };
  const adamFile = compiled('adam', tf.train.adam(0.004, 0.8));
  t.same(
    (await resolveConfig({ ...base, model: adamFile })).optimizer,
    { kind: 'adam', lr: 0.004, beta1: 0.8, beta2: 0.999, epsilon: 1e-7 },
    'the saved adam',
  );
  t.same(
    (await resolveConfig({ ...base, model: adamFile, lr: 0.1 })).optimizer,
    { kind: 'adam', lr: 0.1, beta1: 0.8, beta2: 0.999, epsilon: 1e-7 },
    '--lr over the saved one',
  );
  t.same(
    (await resolveConfig({ ...base, model: adamFile, optimizer: 'sgd' })).optimizer,
    { kind: 'sgd', lr: 0.01, momentum: 0.9 },
    '--optimizer: the saved one ignored',
  );
  await t.rejects(resolveConfig({ ...base, model: adamFile, momentum: 0.5 }), {
    code: 'BAD_CONFIG',
    message:
      /config\.momentum: applies to sgd, momentum, rmsprop only, not adam.* \(adam: the optimizer .*adam\.json was compiled with; give optimizer \(--optimizer\) to choose another\)$/,
  });
  const run = await train({ ...base, model: compiled('adagrad', tf.train.adagrad(0.05, 0.3)), devices: 2 });
  t.same(run.config.optimizer, { kind: 'adagrad', lr: 0.05, initialAccumulatorValue: 0.3 }, 'a run trains with it');
  t.ok(
    run.history.every(h => Number.isFinite(h.loss)),
    'and trains',
  );
  const nadam = path.join(dir, 'nadam.json');
  writeFileSync(
    nadam,
    JSON.stringify({
      ...json,
      trainingConfig: { loss: 'sparseCategoricalCrossentropy', optimizer_config: { class_name: 'Nadam', config: {} } },
    }),
  );
  await t.rejects(resolveConfig({ ...base, model: nadam }), {
    code: 'BAD_CONFIG',
    message:
      /config\.optimizer: .*nadam\.json was compiled with optimizer "Nadam", which tandem does not train with .*: give optimizer \(--optimizer\)/,
  });
  t.same(
    (await resolveConfig({ ...base, model: nadam, optimizer: 'adam' })).optimizer.kind,
    'adam',
    'naming one: the saved Nadam is not looked at',
  );
});
