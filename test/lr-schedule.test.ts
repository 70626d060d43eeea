// Learning-rate schedules: the values of each schedule; fit with a schedule equals tfjs's model.fit with a callback
// setting the optimizer's learning rate before each batch (how tfjs users schedule today); both update paths (the JS
// loops and the native addon's) use the scheduled rate; a run resumed mid-schedule equals the uninterrupted run bit
// for bit; the CLI flags and the refusals.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { fit, train, trainReference, type TrainConfig, type StepMetrics } from '../src/index.js';
import { lrAt, resolveLrSchedule, scheduledArithmetic, type LrSchedule } from '../src/optim/lr-schedule.js';
import { JS_ARITHMETIC, nativeArithmetic } from '../src/optim/flat-arithmetic.js';
import { applyUpdate, type OptimizerConfig } from '../src/optim/flat-optimizer.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { FIT_CASES, twin, worstWeightDifference } from './fixtures/fit-models.js';
import { worstDifference } from './fixtures/weights-difference.js';

await tf.setBackend('cpu');

const NATIVE = { skip: loadNativeAddon().loaded ? false : 'native addon not built' };
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(a));

t.test('each schedule gives the values its formula says', async t => {
  const at = (spec: string, extra: object, steps: number[], total = 10) => {
    const s = resolveLrSchedule({ lrSchedule: spec, ...extra }, 0.1, total, 5);
    return steps.map(k => lrAt(s, 0.1, k));
  };
  t.same(at('constant', { warmupSteps: 4 }, [1, 2, 4, 5, 9]), [0.025, 0.05, 0.1, 0.1, 0.1], 'warm-up from 0');
  t.ok(
    at('constant', { warmupSteps: 4, warmupFrom: 0.2 }, [1, 4]).every((v, i) => close(v, [0.1 * 0.4, 0.1][i])),
    'warm-up from a fraction: 0.2 + 0.8 × 1/4 of lr at step 1',
  );
  const step = at('step:3:0.5', {}, [1, 3, 4, 6, 7]);
  t.ok(
    step.every((v, i) => close(v, [0.1, 0.1, 0.05, 0.05, 0.025][i])),
    `step:3:0.5 ${step}`,
  );
  const exp = at('exponential:2:0.5', {}, [1, 2, 3]);
  t.ok(
    exp.every((v, i) => close(v, 0.1 * Math.pow(0.5, i / 2))),
    `exponential ${exp}`,
  );
  const cos = at('cosine:0.01', { warmupSteps: 2 }, [1, 2, 3, 7, 10, 11, 50]);
  const cosExpected = [0.05, 0.1, ...[0, 4, 7, 8, 8].map(t => 0.01 + 0.09 * 0.5 * (1 + Math.cos((Math.PI * t) / 8)))];
  t.ok(
    cos.every((v, i) => close(v, cosExpected[i])),
    `cosine to 0.01 after 2 warm-up steps: ${cos}`,
  );
  const lin = at('linear', {}, [1, 6, 10, 12]);
  t.ok(
    lin.every((v, i) => close(v, [0.1, 0.05, 0.01, 0][i])),
    `linear to 0: ${lin}`,
  );
  const fn = resolveLrSchedule({ lrSchedule: (k, e) => 0.1 / (1 + k) + e }, 0.1, 10, 5);
  t.same(
    [1, 5, 6, 10, 12].map(k => lrAt(fn, 0.1, k)),
    [0.1, 0.02, 0.1 / 6 + 1, 0.01 + 1, 0.01 + 1],
    'a function',
  );
  t.equal(resolveLrSchedule({}, 0.1, 10, 5), undefined, 'no schedule: none (checkpoints and host flags unchanged)');
  t.equal(lrAt(undefined, 0.3, 7), 0.3);
});

t.test('bad schedules are refused, naming the option and the syntax', async t => {
  const refuse = (fields: object, message: RegExp) =>
    t.throws(() => resolveLrSchedule(fields, 0.1, 10, 5), { code: 'BAD_CONFIG', message }, JSON.stringify(fields));
  refuse({ lrSchedule: 'cosin' }, /config\.lrSchedule: 'cosin' is not a schedule: the schedules are constant, step:/);
  refuse({ lrSchedule: 'step:10' }, /gives 1 value\(s\) to step/);
  refuse({ lrSchedule: 'step:0:0.5' }, /EVERY in 'step:0:0.5' is "0"/);
  refuse({ lrSchedule: 'exponential:5:1.5' }, /GAMMA in 'exponential:5:1.5'/);
  refuse({ lrSchedule: 'cosine:0.5' }, /FLOOR 0.5 in 'cosine:0.5' is above the learning rate 0.1/);
  refuse({ lrSchedule: 'linear', warmupSteps: 10 }, /warmupSteps: is 10, not below the run's 10 steps/);
  refuse({ lrSchedule: () => 0.1, warmupSteps: 2 }, /warmupSteps: does not apply to a function schedule/);
  refuse({ lrSchedule: (k: number) => (k === 3 ? NaN : 0.1) }, /the function returned NaN at step 3/);
  refuse({ warmupFrom: 0.5 }, /config\.warmupFrom: needs warmupSteps > 0/);
  // the steps a decay spans, given to a schedule without one: it was ignored unsaid
  refuse({ lrScheduleSteps: 20 }, /config\.lrScheduleSteps: applies to the cosine and linear .*not 'constant'/);
  refuse({ lrSchedule: 'step:2:0.5', lrScheduleSteps: 20 }, /lrScheduleSteps: .*not 'step:2:0.5'.*remove/);
  refuse({ lrSchedule: 'exponential:2:0.5', lrScheduleSteps: 20 }, /lrScheduleSteps: .*'exponential:2:0.5'/);
  t.ok(resolveLrSchedule({ lrSchedule: 'linear:0.01', lrScheduleSteps: 20 }, 0.1, 10, 5), 'linear spans them');
  const throws = () => {
    throw new Error('no lr here');
  };
  refuse({ lrSchedule: throws }, /config\.lrSchedule: the function threw at step 0: no lr here/);
  await t.rejects(train({ model: 'mlp', data: 'synthetic-images', lrScheduleSteps: 20 }), {
    code: 'BAD_CONFIG',
    message: /config\.lrScheduleSteps: applies to the cosine and linear/,
  });
  await t.rejects(train({ model: 'mlp', data: 'synthetic-images', lrSchedule: 3 as never }), {
    code: 'BAD_CONFIG',
    message: /config\.lrSchedule: must be a schedule's text/,
  });
});

t.test('the CLI flags set the schedule', async t => {
  const { config } = parseTrainArgs(['--lr-schedule', 'step:100:0.5', '--warmup-steps', '20', '--warmup-from', '0.1']);
  t.same(
    { lrSchedule: config.lrSchedule, warmupSteps: config.warmupSteps, warmupFrom: config.warmupFrom },
    { lrSchedule: 'step:100:0.5', warmupSteps: 20, warmupFrom: 0.1 },
  );
});

/** tfjs's way: a callback setting the optimizer's learning rate before each batch (sgd needs setLearningRate). */
function scheduling(optimizer: tf.Optimizer, lrOf: (k: number, epoch: number) => number, stepsPerEpoch: number) {
  const o = optimizer as unknown as { setLearningRate?: (lr: number) => void; learningRate: number };
  return {
    onBatchBegin: async (batch: number) => {
      const k = currentEpoch * stepsPerEpoch + batch;
      const lr = lrOf(k, currentEpoch);
      if (o.setLearningRate) o.setLearningRate(lr);
      else o.learningRate = lr;
    },
    onEpochBegin: async (epoch: number) => void (currentEpoch = epoch),
  };
}
let currentEpoch = 0;

const EPOCHS = 3;
const BATCH = 12; // 48 samples: 4 steps per epoch, 12 in all
const cosineWarm = (lr: number, floor: number, warm: number, total: number) => (k: number) =>
  k < warm
    ? (lr * (k + 1)) / warm
    : floor + (lr - floor) * 0.5 * (1 + Math.cos((Math.PI * (k - warm)) / (total - warm)));

for (const [name, c, schedule, expected] of [
  [
    'sgd, warm-up 3 then cosine to 0.02',
    FIT_CASES[0],
    { lrSchedule: 'cosine:0.02', warmupSteps: 3 },
    cosineWarm(0.2, 0.02, 3, EPOCHS * 4),
  ],
  [
    'adam, step:5:0.3',
    FIT_CASES[1],
    { lrSchedule: 'step:5:0.3' },
    (k: number) => 0.01 * Math.pow(0.3, Math.floor(k / 5)),
  ],
  [
    'sgd, a function of (step, epoch)',
    FIT_CASES[0],
    { lrSchedule: (k: number, epoch: number) => 0.3 / (1 + k) + 0.05 * epoch },
    (k: number, epoch: number) => 0.3 / (1 + k) + 0.05 * epoch,
  ],
] as [string, (typeof FIT_CASES)[number], Partial<TrainConfig>, (k: number, epoch: number) => number][]) {
  t.test(`${name}: fit on 2 devices equals model.fit with a callback setting the lr each batch`, async t => {
    const { x, y } = c.data();
    const reference = c.make();
    const start = twin(reference, c.make);
    const plain = twin(start, c.make);
    const args = { epochs: EPOCHS, batchSize: BATCH, shuffle: false, verbose: 0 as const };
    const ref = await reference.fit(x, y, { ...args, callbacks: scheduling(reference.optimizer, expected, 4) });
    const model = twin(start, c.make);
    const got = await fit(model, x, y, { ...args, devices: 2, backend: 'cpu', ...schedule });
    const w = worstWeightDifference(reference, model);
    t.ok(w <= 1e-4, `final weights max |Δ| ${w.toExponential(2)} ≤ 1e-4`);
    t.ok(
      (got.history.lr as number[]).every((v, e) => Math.abs(v - expected(e * 4 + 3, e)) < 1e-9),
      `History's lr is each epoch's last step's: ${(got.history.lr as number[]).map(v => v.toPrecision(4))}`,
    );
    t.same(Object.keys(got.history).sort(), [...Object.keys(ref.history), 'lr'].sort(), "tfjs's keys, and lr");
    // the comparison can fail: the same fit without the schedule is far from the scheduled tfjs run
    await fit(plain, x, y, { ...args, devices: 2, backend: 'cpu' });
    t.ok(worstWeightDifference(reference, plain) > 1e-3, 'without the schedule the weights differ');
    tf.dispose([x, y]);
    [reference, start, plain, model].forEach(m => m.dispose());
  });
}

t.test('both update paths use the scheduled lr: the addon gives the JS loops bits', NATIVE, async t => {
  const s = resolveLrSchedule({ lrSchedule: 'cosine', warmupSteps: 2 }, 0.05, 8, 4) as LrSchedule;
  const configs: OptimizerConfig[] = [
    { kind: 'sgd', lr: 0.05, momentum: 0.9 },
    { kind: 'sgd', lr: 0.05, momentum: 0 },
    { kind: 'adam', lr: 0.05, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 },
  ];
  for (const config of configs) {
    const n = 37;
    const init = () => Float32Array.from({ length: n }, (_, i) => Math.sin(i + 1));
    const grads = Float32Array.from({ length: n }, (_, i) => Math.cos(i * 3));
    const runs = [scheduledArithmetic(nativeArithmetic(), s), scheduledArithmetic(JS_ARITHMETIC, s), undefined].map(
      arithmetic => {
        const params = init();
        const state = [new Float32Array(n), new Float32Array(n)];
        for (let step = 1; step <= 4; step++) {
          if (arithmetic) arithmetic.applyUpdate(config, params, grads, state, 0, n, step);
          else
            applyUpdate(
              { ...config, lr: lrAt(s, config.lr, step) } as OptimizerConfig,
              params,
              grads,
              state,
              0,
              n,
              step,
            );
        }
        return params;
      },
    );
    t.same(runs[0], runs[2], `${config.kind} momentum ${'momentum' in config ? config.momentum : '-'}: native`);
    t.same(runs[1], runs[2], `${config.kind}: JS`);
    const constant = init();
    const state = [new Float32Array(n), new Float32Array(n)];
    for (let step = 1; step <= 4; step++) nativeArithmetic().applyUpdate(config, constant, grads, state, 0, n, step);
    t.not(constant[0], runs[0][0], 'and differ from the constant lr');
  }
});

const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  datasetSize: 240,
  batch: 12,
  devices: 2,
  seed: 5,
};

t.test(
  'native engine: a scheduled run equals the reference loop (tfjs optimizer, lr set each step)',
  NATIVE,
  async t => {
    // sgd with momentum: adam moves a parameter of a near-zero gradient by ~lr whatever its sign, so summation-order
    // noise shows up as large there (lossless.test.ts); adam's native update is compared bit for bit above.
    const cfg: TrainConfig = { ...base, backend: 'native', optimizer: 'sgd', lr: 0.1, momentum: 0.9, steps: 5 };
    const scheduled = { ...cfg, lrSchedule: 'linear:0.01', warmupSteps: 2 };
    const ref = await trainReference(scheduled);
    const run = await train(scheduled);
    const d = worstDifference(run.weights, ref.weights);
    t.ok(d < 2e-5, `max |Δ| ${d.toExponential(2)} < 2e-5`);
    const constant = await trainReference(cfg);
    t.ok(worstDifference(constant.weights, ref.weights) > 1e-3, 'the reference without the schedule differs');
  },
);

t.test('a run stopped mid-schedule and resumed equals the uninterrupted run bit for bit', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-lr-'));
  const cfg: TrainConfig = {
    ...base,
    backend: 'cpu',
    optimizer: 'sgd',
    lr: 0.1,
    momentum: 0.9,
    steps: 6,
    lrSchedule: 'cosine:0.01',
    warmupSteps: 2,
  };
  const lrs: StepMetrics[] = [];
  const full = await train({ ...cfg, checkpointEvery: 3, checkpointDir: dir }, { onStep: m => lrs.push(m) });
  const s = resolveLrSchedule(cfg, 0.1, 6, 20);
  t.same(
    lrs.map(m => m.lr),
    [1, 2, 3, 4, 5, 6].map(k => lrAt(s, 0.1, k)),
    'each step reports its lr',
  );
  const atThree = path.join(dir, 'checkpoint-000000003.tandem');
  const resumed = await train({ ...cfg, resume: atThree });
  t.equal(resumed.firstStep, 4);
  t.same(resumed.weights, full.weights, '3 + 3 steps = 6 uninterrupted steps, bit for bit');
  await t.rejects(train({ ...cfg, lrSchedule: undefined, warmupSteps: undefined, resume: atThree }), {
    code: 'BAD_CHECKPOINT',
    message: /lrSchedule \{.*"kind":"cosine".*\} in the checkpoint, none in this run/,
  });
  await t.rejects(train({ ...cfg, lrSchedule: 'cosine:0.02', resume: atThree }), {
    code: 'BAD_CHECKPOINT',
    message: /lrSchedule\.floor 0\.01 in the checkpoint, 0\.02 in this run/,
  });
});
