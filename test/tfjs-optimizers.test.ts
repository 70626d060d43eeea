// The flat updates of rmsprop, adagrad, adamax and adadelta (and momentum by name) against tfjs's own optimizers,
// computed two ways (micrograd style): one tensor, one tfjs optimizer's applyGradients, several steps, and the flat
// loop on the same values. On tfjs's cpu backend the two give the same bits (sgd/momentum, whose loop is the native
// addon's twin, within rounding); on the default backend (native when built) within float32 rounding (NaN = NaN:
// centered
// rmsprop takes tfjs's sqrt(ms - (mg² + ε)), NaN where the variance is under ε). Then the config: tfjs's defaults, a
// hyper-parameter of another optimizer refused
// with the flag and the fix (through the real `tandem` command), an unknown name listing the valid ones.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import {
  applyUpdate,
  initialOptimizerState,
  optimizerStateSlots,
  fillInitialOptimizerState,
  type OptimizerConfig,
} from '../src/optim/flat-optimizer.js';
import { nativeArithmetic } from '../src/optim/flat-arithmetic.js';
import { tfjsOptimizer } from '../src/optim/tfjs-optimizer.js';
import { resolveConfig } from '../src/config.js';
import { startBackend, defaultBackend } from '../src/engine/backend.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { prng } from '../src/data/synthetic-images.js';
import { runTandem } from './fixtures/cli-process.js';

const CONFIGS: OptimizerConfig[] = [
  { kind: 'rmsprop', lr: 0.01, decay: 0.9, momentum: 0, epsilon: 1e-7, centered: false },
  { kind: 'rmsprop', lr: 0.02, decay: 0.8, momentum: 0.5, epsilon: 1e-6, centered: true },
  { kind: 'adagrad', lr: 0.05, initialAccumulatorValue: 0.1 },
  { kind: 'adamax', lr: 0.002, beta1: 0.9, beta2: 0.999, epsilon: 1e-7, decay: 0 },
  { kind: 'adamax', lr: 0.01, beta1: 0.8, beta2: 0.95, epsilon: 1e-5, decay: 0.1 },
  { kind: 'adadelta', lr: 1, rho: 0.95, epsilon: 1e-7 },
  { kind: 'sgd', lr: 0.1, momentum: 0.7 },
  { kind: 'sgd', lr: 0.1, momentum: 0.7, nesterov: true },
];
const STEPS = 8,
  N = 1200;

/** Index of the first element whose bits differ (NaN = NaN), or -1. */
function firstDifference(a: Float32Array, b: Float32Array): number {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

/** STEPS steps of `config` on one [N] tensor: tfjs's optimizer and the flat loop, params after every step. */
function bothWays(config: OptimizerConfig, seed: number): { tfjs: Float32Array[]; flat: Float32Array[] } {
  const r = prng(seed);
  const init = Float32Array.from({ length: N }, () => (r() - 0.5) * 4);
  const grads = Array.from({ length: STEPS }, () =>
    Float32Array.from({ length: N }, () => (r() - 0.5) * 10 ** Math.floor(r() * 4 - 2)),
  );
  const v = tf.variable(tf.tensor1d(init), true, `w_${seed}_${config.kind}`);
  const optimizer = tfjsOptimizer(tf, config);
  const tfjs: Float32Array[] = [];
  for (const g of grads) {
    tf.tidy(() => optimizer.applyGradients({ [v.name]: tf.tensor1d(g) }));
    tfjs.push(v.dataSync() as Float32Array);
  }
  optimizer.dispose();
  v.dispose();
  const params = Float32Array.from(init),
    state = Array.from({ length: optimizerStateSlots(config) }, () => new Float32Array(N));
  fillInitialOptimizerState(config, state);
  const flat = grads.map((g, k) => {
    applyUpdate(config, params, g, state, 0, N, k + 1);
    return params.slice();
  });
  return { tfjs, flat };
}

for (const backend of ['cpu', defaultBackend()] as const) {
  t.test(
    `${backend}: the flat updates = tfjs's optimizers over ${STEPS} steps${backend === 'cpu' ? ', bit for bit' : ''}`,
    async t => {
      await startBackend(tf, backend);
      CONFIGS.forEach((config, c) => {
        const { tfjs, flat } = bothWays(config, 100 + c);
        let maxDiff = 0,
          firstBits = -1;
        tfjs.forEach((p, k) => {
          p.forEach((x, i) => {
            maxDiff = Math.max(
              maxDiff,
              Number.isNaN(x) && Number.isNaN(flat[k][i]) ? 0 : Math.abs(x - flat[k][i]) || 0,
              Number.isNaN(x) !== Number.isNaN(flat[k][i]) ? Infinity : 0,
            );
          });
          if (firstBits < 0 && firstDifference(p, flat[k]) >= 0) firstBits = k + 1;
        });
        const moved = flat[STEPS - 1].filter((x, i) => x !== tfjs[0][i]).length;
        t.ok(moved > N / 2, `${JSON.stringify(config)}: moved ${moved} of ${N} after step 1`);
        const name = config.kind === 'sgd' && config.nesterov ? 'sgd nesterov' : config.kind;
        // sgd's loop (the native addon's twin) rounds once per element, tfjs once per operation: within rounding only.
        if (backend === 'cpu' && (config.kind !== 'sgd' || config.nesterov))
          t.equal(
            firstBits,
            -1,
            `${name}: identical bits after every ` +
              `step${firstBits > 0 ? ` (first difference at step ${firstBits}, max ${maxDiff})` : ''}`,
          );
        else
          t.ok(maxDiff < 1e-5, `${name}: max |tfjs - flat| over ${STEPS} steps = ${maxDiff.toExponential(2)} < 1e-5`);
      });
    },
  );
}

t.test(
  'the native arithmetic runs the JS loops for the new kinds: the same bits',
  { skip: !loadNativeAddon().loaded && 'no native addon' },
  async t => {
    const native = nativeArithmetic();
    for (const config of CONFIGS) {
      const r = prng(9),
        p1 = Float32Array.from({ length: N }, () => r() - 0.5),
        p2 = p1.slice();
      const s1 = Array.from({ length: optimizerStateSlots(config) }, () => new Float32Array(N)),
        s2 = s1.map(s => s.slice());
      for (let step = 1; step <= 3; step++) {
        const g = Float32Array.from({ length: N }, () => r() - 0.5);
        applyUpdate(config, p1, g, s1, 5, N - 7, step);
        native.applyUpdate(config, p2, g, s2, 5, N - 7, step);
      }
      t.equal(firstDifference(p1, p2), -1, `${config.kind}: identical`);
    }
  },
);

t.test(
  "tfjs's adadelta scales by the accumulator before the step: its two accumulators stay equal, its update is the " +
    'gradient',
  async t => {
    const config: OptimizerConfig = { kind: 'adadelta', lr: 0.5, rho: 0.9, epsilon: 1e-7 };
    const r = prng(3),
      params = Float32Array.from({ length: N }, () => r() - 0.5),
      state = [new Float32Array(N), new Float32Array(N)];
    for (let step = 1; step <= 5; step++) {
      const g = Float32Array.from({ length: N }, () => r() - 0.5),
        before = params.slice();
      applyUpdate(config, params, g, state, 0, N, step);
      t.equal(firstDifference(state[0], state[1]), -1, `step ${step}: accumulated squares of gradients = of updates`);
      t.equal(
        firstDifference(
          params,
          before.map((p, i) => Math.fround(Math.fround(g[i] * Math.fround(-0.5)) + p)),
        ),
        -1,
        `step ${step}: p - lr × g`,
      );
    }
  },
);

t.test("tfjs's defaults; adagrad's accumulator starts at its initial value", async t => {
  const opt = async (extra: object) =>
    (await resolveConfig({ model: 'mlp', data: 'synthetic-images', ...extra })).optimizer;
  t.same(await opt({ optimizer: 'rmsprop' }), {
    kind: 'rmsprop',
    lr: 0.001,
    decay: 0.9,
    momentum: 0,
    epsilon: 1e-7,
    centered: false,
  });
  t.same(await opt({ optimizer: 'adagrad' }), { kind: 'adagrad', lr: 0.01, initialAccumulatorValue: 0.1 });
  t.same(await opt({ optimizer: 'adamax' }), {
    kind: 'adamax',
    lr: 0.002,
    beta1: 0.9,
    beta2: 0.999,
    epsilon: 1e-7,
    decay: 0,
  });
  t.same(await opt({ optimizer: 'adadelta' }), { kind: 'adadelta', lr: 0.001, rho: 0.95, epsilon: 1e-7 });
  t.same(await opt({ optimizer: 'momentum' }), { kind: 'sgd', lr: 0.01, momentum: 0.9 }, 'momentum: sgd with momentum');
  t.same(await opt({ optimizer: 'adam', beta1: 0.8, epsilon: 1e-4 }), {
    kind: 'adam',
    lr: 0.001,
    beta1: 0.8,
    beta2: 0.999,
    epsilon: 1e-4,
  });
  t.same(initialOptimizerState({ kind: 'adagrad', lr: 0.01, initialAccumulatorValue: 0.1 }), [Math.fround(0.1)]);
  t.same(
    initialOptimizerState({ kind: 'rmsprop', lr: 0.01, decay: 0.9, momentum: 0, epsilon: 1e-7, centered: true }),
    [0, 0, 0],
  );
  await t.rejects(opt({ optimizer: 'adadelta', rho: 1 }), {
    code: 'BAD_CONFIG',
    message: /config\.rho: must be a number in \[0, 1\)/,
  });
  await t.rejects(opt({ optimizer: 'adam', momentum: 0.9 }), {
    code: 'BAD_CONFIG',
    message: /config\.momentum: applies to sgd, momentum, rmsprop only, not adam/,
  });
  t.same(
    await opt({ optimizer: 'momentum', nesterov: true }),
    { kind: 'sgd', lr: 0.01, momentum: 0.9, nesterov: true },
    'nesterov',
  );
  await t.rejects(opt({ optimizer: 'sgd', momentum: 0, nesterov: true }), {
    code: 'BAD_CONFIG',
    message: /config\.nesterov: needs momentum > 0/,
  });
  await t.rejects(opt({ optimizer: 'adam', nesterov: true }), {
    code: 'BAD_CONFIG',
    message: /config\.nesterov: applies to sgd, momentum only, not adam/,
  });
  await t.rejects(opt({ optimizer: 'sgd', nesterov: 'yes' }), {
    code: 'BAD_CONFIG',
    message: /config\.nesterov: must be true or false/,
  });
});

const runCli = (args: string[]) =>
  runTandem(['train', '--model', 'mlp', '--data', 'synthetic-images', '--steps', '1', '--quiet', ...args]);

t.test(
  'the CLI: a hyper-parameter of another optimizer is refused naming the flag and the fix; an unknown name lists ' +
    'the valid ones',
  async t => {
    const rho = await runCli(['--optimizer', 'rmsprop', '--rho', '0.8']);
    t.equal(rho.code, 1, '--rho with rmsprop: exit 1');
    t.match(
      rho.stderr,
      /BAD_CONFIG|--rho \(config\.rho\): applies to adadelta only, not rmsprop, which takes lr, decay, momentum, epsilon, centered \(keras's rho is rmsprop's decay here: set decay instead\); remove rho, or choose optimizer adadelta/,
    );
    t.match(rho.stderr, /--rho \(config\.rho\): applies to adadelta only/);
    const centered = await runCli(['--optimizer', 'adamax', '--centered']);
    t.match(centered.stderr, /--centered \(config\.centered\): applies to rmsprop only, not adamax/);
    const unknown = await runCli(['--optimizer', 'nadam']);
    t.equal(unknown.code, 1);
    t.match(
      unknown.stderr,
      /--optimizer \(config\.optimizer\): must be one of sgd, momentum, adam, rmsprop, adagrad, adamax, adadelta, got "nadam"/,
    );
  },
);
