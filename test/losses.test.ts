// The loss a user's model trains with is the loss model.fit would use: regularization penalties counted,
// probabilities from a separate softmax layer recognised, a single sigmoid output trained with binary
// cross-entropy. Compared two ways: tandem on 3 devices (each device's loss and penalties, averaged) against
// tfjs's own model.fit on the same global batches, in the same order (1 device's path: lossless.test.ts).
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { train, resolveConfig, type TrainConfig, type TrainSummary } from '../src/index.js';
import { worstDifference } from './fixtures/weights-difference.js';
import { fitReference } from './fixtures/fit-reference.js';

const model = (name: string) => fileURLToPath(new URL(`../../test/fixtures/models/${name}.mjs`, import.meta.url));
const backend = process.env.TANDEM_BACKEND as TrainConfig['backend'] | undefined;

const base: TrainConfig = {
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 96,
  batch: 12,
  steps: 3,
  optimizer: 'sgd',
  lr: 0.1,
  momentum: 0,
  seed: 11,
  backend,
};

const cases = [
  { name: 'l2-softmax', classes: 4, loss: 'sparseCategoricalCrossentropy', what: 'L2/L1 regularizers counted' },
  {
    name: 'softmax-layer',
    classes: 4,
    loss: 'sparseCategoricalCrossentropy',
    what: 'a separate softmax layer read as probabilities',
  },
  { name: 'binary-sigmoid', classes: 2, loss: 'binaryCrossentropy', what: 'one sigmoid output: binary cross-entropy' },
] as const;

/** l2-softmax on 3 devices: run once, for its case and for the test that shows the comparison can fail. */
let l2OnThree: Promise<TrainSummary> | undefined;
const trainOnThree = (cfg: TrainConfig) =>
  cfg.model === model('l2-softmax') ? (l2OnThree ??= train({ ...cfg, devices: 3 })) : train({ ...cfg, devices: 3 });

for (const c of cases) {
  t.test(`${c.name}: ${c.what}; 3 devices = model.fit on the global batches`, async t => {
    const cfg: TrainConfig = { ...base, model: model(c.name), classes: c.classes };
    const ref = await fitReference(cfg, c.loss);
    for (const devices of [3]) {
      const run = await trainOnThree(cfg);
      const worst = worstDifference(run.weights, ref);
      t.ok(worst < 1e-5, `${devices} device(s): max |param - model.fit| = ${worst.toExponential(2)} < 1e-5`);
      t.ok(Number.isFinite(run.finalLoss), 'a finite loss');
    }
  });
}

t.test('the comparison can fail: the same model without its regularizers trains elsewhere', async t => {
  const run = await trainOnThree({ ...base, model: model('l2-softmax'), classes: 4 }); // the l2-softmax case's run
  const withoutPenalties = await fitReference(
    { ...base, model: model('dense-softmax') },
    'sparseCategoricalCrossentropy',
  );
  const worst = worstDifference(run.weights, withoutPenalties);
  t.ok(worst > 1e-3, `ignoring the penalties would be seen: max |difference| ${worst.toExponential(2)}`);
});

t.test('a binary model is refused for more than two classes, with the fix', async t => {
  await t.rejects(resolveConfig({ ...base, model: model('binary-sigmoid'), classes: 3 }), {
    code: 'SHAPE_MISMATCH',
    message: /outputs shape \[1\] but data .* has 3 classes/,
  });
});

t.test(
  'regression: loss mse with float targets from a data module; 3 devices = model.fit with meanSquaredError',
  async t => {
    const cfg: TrainConfig = {
      ...base,
      model: model('regressor'),
      data: fileURLToPath(new URL('../../test/fixtures/regression.mjs', import.meta.url)),
      classes: undefined,
      imageSize: undefined,
      loss: 'mse',
      lr: 0.05,
    };
    const ref = await fitReference(cfg, 'meanSquaredError');
    for (const devices of [3]) {
      const run = await train({ ...cfg, devices });
      const worst = worstDifference(run.weights, ref);
      t.ok(worst < 1e-5, `${devices} device(s): max |param - model.fit| = ${worst.toExponential(2)} < 1e-5`);
      t.ok(
        run.finalLoss < run.history[0].loss,
        `the squared error falls: ${run.history[0].loss.toFixed(4)} -> ${run.finalLoss.toFixed(4)}`,
      );
      t.ok(Number.isNaN(run.finalAccuracy), 'no accuracy for a regression');
    }
    await t.rejects(resolveConfig({ ...base, model: 'mlp', loss: 'mse' }), {
      code: 'BAD_CONFIG',
      message: /mse \(regression\) needs float targets/,
    });
  },
);

t.test(
  'a saved model.json carries the loss it was compiled with (trainingConfig); one tandem cannot train is refused',
  async t => {
    const { mkdtempSync, writeFileSync, readFileSync } = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const out = mkdtempSync(path.join(os.tmpdir(), 'tandem-saved-'));
    const first = await train({ ...base, model: model('binary-sigmoid'), classes: 2, devices: 1, steps: 1, out });
    t.ok(first.modelPath, 'a model.json written');
    const json = JSON.parse(readFileSync(first.modelPath!, 'utf8')) as Record<string, unknown>;
    const withLoss = (loss: unknown) => {
      const file = path.join(out, `compiled-${JSON.stringify(loss).replace(/\W/g, '')}.json`);
      writeFileSync(
        file,
        JSON.stringify({ ...json, trainingConfig: { loss, optimizer_config: { class_name: 'SGD', config: {} } } }),
      ); // weights beside it
      return file;
    };
    const cfg = await resolveConfig({ ...base, model: withLoss('binaryCrossentropy'), classes: 2 });
    t.equal(cfg.loss, 'binary', 'binaryCrossentropy read from trainingConfig');
    await t.rejects(resolveConfig({ ...base, model: withLoss('hinge'), classes: 2 }), {
      code: 'BAD_CONFIG',
      message: /compiled with loss hinge, which tandem does not train/,
    });
    for (const oneOutput of [['binary_crossentropy'], { dense_Dense1: 'binary_crossentropy' }]) {
      // compile({ loss: [x] }) / { output: x }, saved as given
      t.equal(
        (await resolveConfig({ ...base, model: withLoss(oneOutput), classes: 2 })).loss,
        'binary',
        `${JSON.stringify(oneOutput)}: the one output's loss`,
      );
    }
    await t.rejects(resolveConfig({ ...base, model: withLoss(['hinge']), classes: 2 }), {
      code: 'BAD_CONFIG',
      message: /^config\.loss: \/.*compiled with loss hinge, which tandem does not train/,
    });
    const given = await resolveConfig({ ...base, model: withLoss('hinge'), classes: 2, loss: 'binary' });
    t.equal(given.loss, 'binary', "the config's loss wins over the saved one");
  },
);
