// Real profiles on the devices' engine (the default backend here; `npm run test:wasm` runs this file on
// wasm), timed on the profiling thread's CPU time, through `--strategy auto` as a user meets them. A
// functional model is profiled with every layer, in topological order, as the layout orders them. Measured
// verdicts are asserted only where the measured margin is large (>= 10 points of compute: these models
// measured 16-73 points on native and wasm, at load average 15-18 on 2 cores), so load cannot flip what the
// test checks; the decision and its margin are tested on fixed inputs in alexnet-like.test.ts. convnet-gap
// (AlexNet-like on native, not on wasm, ~12 points either way) and the full alexnet (~7 points) are not here.
import t from 'tap';
import { availableParallelism } from 'node:os';
import * as tf from '@tensorflow/tfjs';
import { profileModel } from '../src/profiling/profile-model.js';
import { decideAlexNetLike, marginSentence, type AlexNetVerdict } from '../src/profiling/alexnet-like.js';
import { predictStrategies } from '../src/profiling/cost-model.js';
import { layerGraph } from '../src/profiling/layer-graph.js';
import { layersOf, layoutParameters } from '../src/model/parameter-layout.js';
import { BUILTIN_MODELS } from '../src/model/builtin-models.js';
import { parseLink } from '../src/pipeline/link-model.js';
import { train, type TrainConfig } from '../src/index.js';
import type { AutoChoice } from '../src/profiling/choose-strategy.js';

const backend = process.env.TANDEM_BACKEND as TrainConfig['backend'] | undefined;
const synthetic = { data: 'synthetic-images', devices: 2, backend } as const;
const LARGE_MARGIN = 0.1;

type Assert = Pick<typeof t, 'equal' | 'comment'>;

/** Asserts the verdict only where no plausible timing error can flip it; says so otherwise. */
function verdictWhereMarginIsLarge(t: Assert, model: string, v: AlexNetVerdict, like: boolean) {
  const { time } = v.margin;
  if (time === null || time >= LARGE_MARGIN)
    t.equal(v.alexnetLike, like, `${model}: ${v.reason}; ${marginSentence(v)}`);
  else
    t.comment(
      `${model}: verdict not asserted, margin ${(time * 100).toFixed(1)} points < ${LARGE_MARGIN * 100}: ${v.reason}`,
    );
}

t.test(
  '--strategy auto on functional resnet-mini: every layer profiled in topological order, as the layout orders them; ' +
    'trains',
  async t => {
    const imageSize = [8, 8, 3];
    let choice: AutoChoice | undefined;
    const summary = await train(
      { ...synthetic, model: 'resnet-mini', imageSize, batch: 4, steps: 2, strategy: 'auto' },
      {
        onAutoChoice: c => {
          choice = c;
        },
      },
    );
    const { profile, verdict, reason } = choice!;
    if (process.platform === 'linux') t.equal(profile.clock.kind, 'thread-cpu', `clock: ${profile.clock.reason}`);
    // The same architecture built here: its graph in model order, which must be topological.
    const model = await BUILTIN_MODELS['resnet-mini'].factory(tf, { inputShape: imageSize, classes: 10, seed: 1 });
    const graph = layerGraph(tf, model);
    const position = new Map(graph.layers.map((l, i) => [l, i]));
    const producer = new Map(graph.calls.flatMap(c => c.outputs.map(k => [k, c.layer] as const)));
    const late = graph.calls.filter(c =>
      c.inputs.some(k => k !== graph.input && position.get(producer.get(k)!)! >= position.get(c.layer)!),
    );
    t.same(
      late.map(c => c.layer.name),
      [],
      'model order is topological: every layer comes after the layers that feed it',
    );
    const expected = [...graph.layers].reverse();
    t.same(
      profile.layers.map(l => l.className),
      expected.map(l => l.getClassName()),
      `all ${expected.length} layers, in reverse topological order (transmission order)`,
    );
    t.same(
      profile.layers.map(l => l.parameters),
      expected.map(l => l.trainableWeights.reduce((s, w) => s + w.read().size, 0)),
      'parameters per layer',
    );
    t.same(
      profile.layers.filter(l => l.parameters > 0).map(l => l.name),
      layersOf(layoutParameters(profile.weights)).map(l => l.name),
      "the layers with parameters are exactly the layout's layers, in its order",
    );
    t.ok(
      profile.layers.every(l => Number.isFinite(l.forwardMs) && l.forwardMs >= 0 && l.backwardMs >= 0),
      'finite, non-negative times',
    );
    t.ok(
      profile.layers.filter(l => l.className === 'Conv2D').every(l => l.forwardMs + l.backwardMs > 0),
      'every convolution takes measurable time',
    );
    verdictWhereMarginIsLarge(t, 'resnet-mini', verdict, false);
    t.match(reason, /margin/, 'the choice says how far the verdict is from flipping');
    t.equal(summary.config.strategy, choice!.strategy, `trained with the chosen ${choice!.strategy}`);
    t.equal(summary.steps, 2);
  },
);

t.test(
  '--strategy auto on alexnet-mini: AlexNet-like with the FC layers first (where its margin is large), two-group at ' +
    'p among the candidates, the pick trained',
  async t => {
    let choice: AutoChoice | undefined;
    const summary = await train(
      { ...synthetic, model: 'alexnet-mini', imageSize: [32, 32, 3], batch: 32, steps: 3, strategy: 'auto' },
      {
        onAutoChoice: c => {
          choice = c;
        },
      },
    );
    const { profile, verdict } = choice!;
    verdictWhereMarginIsLarge(t, 'alexnet-mini', verdict, true);
    if (verdict.alexnetLike) {
      const dense = profile.layers.filter(l => l.className === 'Dense').map(l => l.name);
      t.same(
        verdict.fcGroup.slice(0, dense.length),
        dense,
        `the first group starts with the FC layers: ${verdict.fcGroup.join(', ')}`,
      );
      t.ok(
        profile.layers.slice(verdict.p).every(l => l.className !== 'Dense'),
        'no FC layer left in the conv group',
      );
      const twoGroup = choice!.candidates.filter(c => c.strategy === 'two-group');
      t.ok(
        twoGroup.length > 0 && twoGroup.every(c => (c.splitLayer ?? 0) >= 2),
        `two-group is a candidate, its FC group holds logits and fc1 (p = ${twoGroup[0]?.splitLayer} layers with ` +
          `parameters)`,
      );
    }
    t.equal(
      summary.config.strategy,
      choice!.strategy,
      `trained with the pick, ${choice!.candidates.find(c => c.predictedMs === choice!.predictedMs)?.key}`,
    );
    t.ok(
      choice!.predictedMs <= choice!.candidates[0].predictedMs * 1.02 + 1e-9,
      'the pick is within 2% of the fastest prediction',
    );
    t.equal(summary.config.forwardWait, choice!.forwardWait, 'with its forward wait');
    const cal = profile.calibration!;
    t.ok(
      cal.cpuMsPerStep! > 0 && cal.cpuMsPerStep! < 2 * availableParallelism() * cal.steadyStepMs,
      `the calibration measured ${cal.cpuMsPerStep!.toFixed(1)} ms of process CPU per ` +
        `${cal.steadyStepMs.toFixed(1)} ms step (fewer than the cores can give, with margin)`,
    );
    t.equal(choice!.cpu.hostsOnMachine, 1, "one host: this machine's cores are its own");
    t.equal(summary.config.commHook, undefined, 'no comm hook without --comm-hook auto');
    for (const link of [undefined, parseLink('1gbps'), parseLink('100mbps')]) {
      const preds = predictStrategies(profile, 2, { bucketCapMB: 0.5, firstBucketMB: 0.125 }, link);
      const seq = preds.find(p => p.strategy === 'sequential')!;
      t.ok(
        Math.abs(seq.stepMs - (seq.computeMs + seq.commMs + profile.overheadMs)) < 1e-6,
        `${link?.label ?? 'no link'}: sequential = compute + comm + overhead`,
      );
      t.ok(
        preds.every(p => p.stepMs >= p.lowerBoundMs - 1e-9),
        `${link?.label ?? 'no link'}: every prediction >= its lower bound`,
      );
    }
  },
);

t.test('profileModel without calibration: mlp is not AlexNet-like (where its margin is large)', async t => {
  const profile = await profileModel({ ...synthetic, model: 'mlp', batch: 64 }, train, {
    steps: 2,
    warmupSteps: 2,
    reps: 3,
    calibrate: false,
  });
  t.equal(profile.calibration, undefined, 'not calibrated');
  t.same(
    profile.layers.map(l => l.className),
    ['Dense', 'Dense', 'Dense', 'Flatten'],
    'transmission order',
  );
  verdictWhereMarginIsLarge(t, 'mlp', decideAlexNetLike(profile.layers), false);
});
