// tfjs 4.22's model.fit takes stepsPerEpoch and validationSteps and ignores them (its fitLoop gets them null): fit
// does the same, so a program written for model.fit runs on tandem, and it warns once for each (a process warning,
// code TANDEM_FIT_IGNORED). The History equals model.fit's with the same arguments. sampleWeight, which model.fit
// refuses, fit refuses too; model.evaluate takes it and ignores it, and so does evaluate, with the same warning.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { evaluate, fit } from '../src/index.js';

const make = () => {
  const model = tf.sequential({
    layers: [
      tf.layers.dense({
        inputShape: [3],
        units: 4,
        activation: 'relu',
        kernelInitializer: tf.initializers.glorotUniform({ seed: 1 }),
      }),
      tf.layers.dense({ units: 1, kernelInitializer: tf.initializers.glorotUniform({ seed: 2 }) }),
    ],
  });
  model.compile({ optimizer: 'sgd', loss: 'meanSquaredError' });
  return model;
};

/** Relative difference of two numbers (0 when both are 0). */
const rel = (a: number, b: number) => (a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b)));

t.test('stepsPerEpoch and validationSteps: ignored as by model.fit, with one warning each', async t => {
  const x = tf.randomUniform([20, 3], -1, 1, 'float32', 5);
  const y = tf.randomUniform([20, 1], -1, 1, 'float32', 6);
  const [vx, vy] = [tf.randomUniform([6, 3], -1, 1, 'float32', 7), tf.randomUniform([6, 1], -1, 1, 'float32', 8)];
  const args = { epochs: 3, batchSize: 4, shuffle: false, stepsPerEpoch: 1, validationSteps: 1 };
  const reference = await make().fit(x, y, { ...args, validationData: [vx, vy], verbose: 0 });
  const warnings: Error[] = [];
  const listen = (w: Error) => warnings.push(w);
  process.on('warning', listen);
  t.teardown(() => void process.off('warning', listen));
  const history = await fit(make(), x, y, { ...args, validationData: [vx, vy], verbose: 0, backend: 'cpu' });
  await new Promise(resolve => setImmediate(resolve)); // process warnings are emitted on the next tick
  t.equal(history.epoch.length, 3, 'every epoch ran');
  for (const key of ['loss', 'val_loss']) {
    const worst = Math.max(
      ...reference.history[key].map((v, i) => rel(v as number, history.history[key][i] as number)),
    );
    t.ok(
      worst < 1e-5,
      `${key} as model.fit's with the same arguments (worst relative difference ${worst.toExponential(2)})`,
    );
  }
  const ours = warnings.filter(w => (w as Error & { code?: string }).code === 'TANDEM_FIT_IGNORED');
  t.same(
    ours.map(w => w.message),
    [
      "fit: stepsPerEpoch is ignored, as tfjs's model.fit ignores it: each epoch trains all of x",
      "fit: validationSteps is ignored, as tfjs's model.fit ignores it: validation runs on all of the validation data",
    ],
    'one warning for each, naming it and what runs instead',
  );
  tf.dispose([x, y, vx, vy]);
});

t.test('sampleWeight: refused, as model.fit refuses it', async t => {
  const x = tf.ones([8, 3]);
  const y = tf.ones([8, 1]);
  const w = tf.ones([8]);
  await t.rejects(make().fit(x, y, { sampleWeight: w, verbose: 0 }), /sample weight is not supported/, 'tfjs refuses');
  await t.rejects(fit(make(), x, y, { sampleWeight: w, backend: 'cpu' }), {
    code: 'BAD_CONFIG',
    message: /sampleWeight/,
  });
  tf.dispose([x, y, w]);
});

t.test('evaluate: sampleWeight ignored as by model.evaluate, with one warning', async t => {
  const x = tf.randomUniform([10, 3], -1, 1, 'float32', 9);
  const y = tf.randomUniform([10, 1], -1, 1, 'float32', 10);
  const w = tf.linspace(0, 1, 10);
  const model = make();
  const reference = model.evaluate(x, y, { sampleWeight: w, batchSize: 4 }) as tf.Scalar;
  const plain = model.evaluate(x, y, { batchSize: 4 }) as tf.Scalar;
  t.equal(reference.dataSync()[0], plain.dataSync()[0], 'tfjs: the weights change nothing');
  const warnings: Error[] = [];
  const listen = (e: Error) => warnings.push(e);
  process.on('warning', listen);
  t.teardown(() => void process.off('warning', listen));
  const ours = (await evaluate(model, x, y, { sampleWeight: w, batchSize: 4, backend: 'cpu' })) as tf.Scalar;
  await new Promise(resolve => setImmediate(resolve));
  const [a, b] = [ours.dataSync()[0], reference.dataSync()[0]];
  t.ok(rel(a, b) < 1e-6, `the loss as model.evaluate's (${a} against ${b})`);
  t.same(
    warnings.filter(e => (e as Error & { code?: string }).code === 'TANDEM_FIT_IGNORED').map(e => e.message),
    ["evaluate: sampleWeight is ignored, as tfjs's model.evaluate ignores it: every sample weighs the same"],
    'one warning, naming it',
  );
  tf.dispose([x, y, w, reference, plain, ours]);
});
