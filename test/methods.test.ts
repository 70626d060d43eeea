// A training method is one file: a plugin registers methods the library does not have; they train
// on N devices like the built-in ones (the same parameters as one device on the same global batch),
// and an error a method raises on a device thread arrives on the main thread with its code.
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { train, resolveConfig, TandemError, type TrainConfig } from '../src/index.js';
import { getMethod, methodNames, registerMethod } from '../src/methods/method-registry.js';
import { DATA_PARALLEL } from '../src/methods/data-parallel.js';

const plugin = fileURLToPath(new URL('./fixtures/squared-error-method.js', import.meta.url));
const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 96,
  batch: 12,
  steps: 6,
  backend: 'cpu',
  lr: 0.5,
  momentum: 0,
  seed: 5,
  plugins: [plugin],
};

t.test(
  'the built-in methods are registry entries; duplicates and unknown names are refused, naming the known ones',
  async t => {
    t.same(methodNames().slice(0, 3), ['data-parallel', 'local-head', 'partial-fc']);
    t.equal(getMethod('data-parallel'), DATA_PARALLEL);
    t.throws(() => registerMethod(DATA_PARALLEL), { code: 'BAD_CONFIG', message: /already registered/ });
    await t.rejects(resolveConfig({ method: 'telepathy' }), {
      code: 'BAD_CONFIG',
      message: /config\.method: must be one of data-parallel, local-head, partial-fc/,
    });
  },
);

t.test(
  'a plugin method trains: 1 and 3 devices on the same global batch reach the same parameters, and the loss falls',
  async t => {
    const one = await train({ ...base, method: 'squared-error', devices: 1 });
    const three = await train({ ...base, method: 'squared-error', devices: 3 });
    const plain = await train({ ...base, devices: 1 });
    let worst = 0;
    one.weights.forEach((w, k) =>
      w.values.forEach((v, i) => {
        worst = Math.max(worst, Math.abs(v - three.weights[k].values[i]));
      }),
    );
    t.ok(worst < 1e-5, `max |1 device - 3 devices| = ${worst.toExponential(2)}`);
    t.ok(
      one.finalLoss < one.history[0].loss,
      `squared-error loss falls: ${one.history[0].loss.toFixed(4)} -> ${one.finalLoss.toFixed(4)}`,
    );
    t.ok(one.history[0].loss < 1, 'a squared error on probabilities (< 1), not a cross-entropy');
    t.not(plain.history[0].loss, one.history[0].loss, 'another loss than the built-in cross-entropy');
  },
);

t.test(
  'an error raised on a device thread keeps its code, with its context and the original error as cause',
  async t => {
    const err = await train({ ...base, method: 'fails-at-step-2', devices: 2 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof TandemError, 'a TandemError');
    const e = err as TandemError;
    t.equal(e.code, 'BAD_DATA');
    t.match(e.context, { device: 1, step: 2, phase: 'forward' });
    t.match(
      e.message,
      /device 1 failed at step 2 in phase forward \(compute thread\): TandemError: device 1 refuses the labels of step 2/,
    );
    t.ok(
      e.cause instanceof TandemError && (e.cause as TandemError).code === 'BAD_DATA',
      'the cause is the error as raised',
    );
  },
);
