// The comm thread's bf16 copy of the parameters (precision bf16, native engine): after each group's update the comm
// thread casts the group into a shared copy and records the step it holds (pipeline/operators/mirror-params-bf16.ts);
// a device's passes read a weight from the copy where it holds the step the forward waited for
// (actors/params-mirror.ts, engine/native/bf16-shadows.ts), instead of casting the weight themselves. Checked here:
// - the operator writes the group's cast, nothing else, and the step;
// - which ranges the copy holds: none before the first update, a range only when every group it touches holds s − 1;
// - a dense net's step reads a weight from the copy where it holds (a copy of other values changes the answer) and
//   casts as before where it does not;
// - training on 1 and 2 devices gives the same bits with the copy as without (TANDEM_PARAMS_BF16=off), also with
//   buckets, priority order, accumulation and a learning-rate schedule.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1), or when oneDNN has no bf16 kernel here.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { lastValueFrom, of } from 'rxjs';
import { startBf16OrSkip } from './fixtures/bf16-gate.js';
import { identical } from './fixtures/native-compare.js';
import type { NativeAddon } from '../src/engine/native/native-addon.js';
import { denseNet, denseStep } from './fixtures/dense-step.js';
import { mirrorParamsBf16 } from '../src/pipeline/operators/mirror-params-bf16.js';
import { paramsMirror } from '../src/actors/params-mirror.js';
import { allocateParamsBf16, type SharedBuffers } from '../src/actors/shared-buffers.js';
import { assignWeight } from '../src/model/flat-weights.js';
import type { ParamsMirror } from '../src/engine/engine.js';
import { startTraining, type TrainConfig } from '../src/index.js';

const addon = await startBf16OrSkip();
if (addon) registerTests(addon);

function cast(addon: NativeAddon, values: Float32Array): Uint16Array {
  const bits = new Uint16Array(values.length);
  addon.castToBf16(values, bits, 'auto');
  return bits;
}

function registerTests(addon: NativeAddon) {
  t.teardown(() => addon.setPrecision('fp32'));
  const groups = [
    { name: 'a', start: 0, end: 10 },
    { name: 'b', start: 10, end: 30 },
  ];

  t.test("the operator writes the group's cast and the step it holds, nothing else", async t => {
    const params = Float32Array.from({ length: 30 }, (_, i) => Math.sin(i) * 3);
    const copy = { bits: new Uint16Array(30).fill(7), steps: new Int32Array(2).fill(-1) };
    const op = mirrorParamsBf16(params, copy, groups, (src, dst) => addon.castToBf16(src, dst, 'auto'));
    await lastValueFrom(of({ step: 4, group: 1, waitStart: 0, waitEnd: 0 }).pipe(op));
    t.same([...copy.bits.subarray(10)], [...cast(addon, params.subarray(10))], 'group b cast');
    t.same([...copy.bits.subarray(0, 10)], new Array(10).fill(7), 'group a untouched');
    t.same([...copy.steps], [-1, 4], 'the step group b holds');
    t.end();
  });

  t.test('the ranges the copy holds for a step', t => {
    const buffers = { total: 30, ...allocateParamsBf16(1, 30, groups.length) } as SharedBuffers;
    const params = new Float32Array(30);
    const at = paramsMirror(buffers, 0, groups, params)!;
    const steps = new Int32Array(buffers.paramsBf16Steps!);
    t.notOk(at(1).holds(0, 10), 'nothing before the first update');
    steps.set([0, 0]);
    t.ok(at(1).holds(0, 10) && at(1).holds(5, 15) && at(1).holds(10, 30), 'step 1 reads the updates of step 0');
    t.notOk(at(2).holds(0, 10), 'step 2 needs the updates of step 1');
    steps[0] = 1;
    t.ok(at(2).holds(0, 10), 'group a holds step 1');
    t.notOk(at(2).holds(5, 15), 'a range across a group that does not');
    t.notOk(at(1).holds(25, 31) || at(1).holds(3, 3), 'past the groups, or empty');
    t.equal(paramsMirror({ total: 30 } as SharedBuffers, 0, groups, params), undefined, 'no copy: no mirror');
    t.end();
  });

  /** The model's weights moved into one flat array (as the trainer's shared slot), each variable a view of it. */
  const flatten = (model: tf.Sequential) => {
    const shapes = model.trainableWeights.map(w => w.shape as number[]);
    const sizes = shapes.map(shape => shape.reduce((a, b) => a * b, 1));
    const params = new Float32Array(sizes.reduce((a, b) => a + b, 0));
    let at = 0;
    const ranges = model.trainableWeights.map((w, i) => {
      params.set(w.read().dataSync(), at);
      const range = [at, at + sizes[i]] as const;
      assignWeight(w, tf.tensor(params.subarray(at, at + sizes[i]), shapes[i], 'float32'));
      at += sizes[i];
      return range;
    });
    return { params, ranges };
  };
  t.test('a step reads a weight from the copy where it holds, and casts it where it does not', t => {
    addon.setPrecision('bf16');
    const model = denseNet();
    const { params, ranges } = flatten(model);
    const [k0s, k0e] = ranges[0];
    // the copy of layer 0's kernel holds twice its values (exact in bf16): a step that reads it multiplies by 2W
    const twice = params.slice();
    for (let i = k0s; i < k0e; i++) twice[i] *= 2;
    const bits = cast(addon, twice);
    const held = (range: (s: number, e: number) => boolean): ParamsMirror => ({ params, bits, holds: range });
    const plain = denseStep(model, false);
    const readAll = denseStep(
      model,
      true,
      held(() => true),
    );
    const readNone = denseStep(
      model,
      true,
      held(() => false),
    );
    const readOthers = denseStep(
      model,
      true,
      held(s => s >= k0e),
    );
    readNone.forEach((v, i) => t.ok(identical(v, plain[i]), `held nowhere, output ${i}: the bits of no copy`));
    readOthers.forEach((v, i) => t.ok(identical(v, plain[i]), `others held (their true cast), output ${i}: the same`));
    const kernel = model.layers[0].getWeights()[0];
    model.layers[0].setWeights([tf.mul(kernel, 2), model.layers[0].getWeights()[1]]);
    const doubled = denseStep(model, false);
    t.ok(
      identical(readAll[0], doubled[0]),
      "held: the loss is the one of layer 0's kernel doubled (the copy was read)",
    );
    t.notOk(identical(readAll[0], plain[0]), 'and not the loss of the weights themselves');
    model.dispose();
    addon.setPrecision('fp32');
    t.end();
  });

  t.test('training in bf16 gives the same bits with the copy as without', async t => {
    const run = async (devices: number, copy: 'on' | 'off', more: Partial<TrainConfig>) => {
      process.env.TANDEM_PARAMS_BF16 = copy;
      try {
        const training = startTraining({
          ...{ model: 'mnist-node', data: 'synthetic-images', imageSize: [28, 28, 1], datasetSize: 128, classes: 10 },
          ...{ devices, batch: 16 * devices, steps: 8, backend: 'native', precision: 'bf16' },
          ...{ optimizer: 'sgd', lr: 0.05, momentum: 0.9, ...more },
        });
        const s = await training.done;
        return { loss: s.finalLoss, checksum: s.replicaChecksum };
      } finally {
        delete process.env.TANDEM_PARAMS_BF16;
      }
    };
    // many small groups (each weight's copy held by its own), chunks sent by priority, micro-batches, a schedule
    // wrapping the arithmetic that casts
    const awkwardRun: Partial<TrainConfig> = {
      ...{ strategy: 'buckets', bucketCapMB: 0.3, firstBucketMB: 0.05, exchangeOrder: 'priority', chunkFloats: 50_000 },
      ...{ accumulate: 2, lrSchedule: 'cosine', lrScheduleSteps: 8 },
    };
    for (const [devices, more, what] of [
      [1, {}, '1 device'],
      [2, {}, '2 devices'],
      [2, awkwardRun, '2 devices, buckets, priority, accumulate 2, a cosine schedule'],
    ] as const) {
      const [on, off] = [await run(devices, 'on', more), await run(devices, 'off', more)];
      t.equal(on.checksum, off.checksum, `${what}: the same parameters`);
      t.equal(on.loss, off.loss, `${what}: the same loss`);
    }
  });
}
