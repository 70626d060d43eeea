// The AlexNet-like decision (seed 000, claims 8-10) as a pure function on injected profiles.
import t from 'tap';
import { decideAlexNetLike, marginSentence, parameterisedSplit } from '../src/profiling/alexnet-like.js';
import type { LayerCost } from '../src/profiling/layer-profile.js';

const layer = (name: string, ms: number, parameters: number): LayerCost => ({
  name,
  className: 'X',
  forwardMs: ms / 2,
  backwardMs: ms / 2,
  parameters,
  bytes: parameters * 4,
  outputSize: 1,
});

// Transmission order: output layer first.
const alexnetLike = [
  layer('fc8', 2, 40_000),
  layer('fc7', 8, 16_000_000),
  layer('fc6', 10, 37_000_000),
  layer('pool5', 1, 0),
  layer('conv5', 20, 900_000),
  layer('conv4', 25, 1_300_000),
  layer('conv3', 20, 900_000),
  layer('conv2', 10, 600_000),
  layer('conv1', 4, 35_000),
];

// Profiles measured once and fixed here (transmission order; ms = forward + backward on the thread-CPU clock,
// 2 devices): the full alexnet on wasm at 4 samples per device (AlexNet-like, 7.1 points of margin), and the
// functional resnet-mini on wasm at 16 per device (not AlexNet-like).
const fixed = (rows: [string, number, number][]) => rows.map(([name, ms, parameters]) => layer(name, ms, parameters));
const FIXED_PROFILES: Record<string, LayerCost[]> = {
  'seed picture': alexnetLike,
  'alexnet (wasm)': fixed([
    ['logits', 1.938, 40970],
    ['fc7', 149.006, 16781312],
    ['fc6', 311.828, 37752832],
    ['flatten', 1.064, 0],
    ['pool3', 7.204, 0],
    ['conv5', 373.052, 884992],
    ['conv4', 446.107, 1327488],
    ['conv3', 295.959, 885120],
    ['pool2', 24.051, 0],
    ['conv2', 740.379, 614656],
    ['pool1', 43.75, 0],
    ['conv1', 195.632, 34944],
  ]),
  'resnet-mini (wasm)': fixed([
    ['logits', 0.335, 330],
    ['gap', 0.688, 0],
    ['relu5', 0.828, 0],
    ['add2', 1.051, 0],
    ['bn6', 7.326, 64],
    ['bn5', 7.244, 64],
    ['conv6', 6.526, 512],
    ['conv5', 15.859, 9216],
    ['relu4', 0.641, 0],
    ['bn4', 6.119, 64],
    ['conv4', 21.581, 4608],
    ['relu3', 1.469, 0],
    ['add1', 1.672, 0],
    ['bn3', 14.574, 32],
    ['conv3', 20.582, 2304],
    ['relu2', 1.61, 0],
    ['bn2', 13.929, 32],
    ['conv2', 40.889, 2304],
    ['relu1', 2.105, 0],
    ['bn1', 13.349, 32],
    ['conv1', 6.148, 432],
  ]),
};

t.test('AlexNet-like: p is the last layer within the time share; FC group first', async t => {
  const v = decideAlexNetLike(alexnetLike);
  t.equal(v.alexnetLike, true, v.reason);
  t.equal(v.p, 4, 'fc8, fc7, fc6, pool5 fit in 25% (21 of 100 ms); conv5 would break it');
  t.same(v.fcGroup, ['fc8', 'fc7', 'fc6', 'pool5']);
  t.same(v.convGroup, ['conv5', 'conv4', 'conv3', 'conv2', 'conv1']);
  t.ok(Math.abs(v.fcTimeShare - 0.21) < 1e-9);
  t.ok(v.convParamShare < 0.07);
  t.equal(
    parameterisedSplit(alexnetLike, v.p),
    3,
    'pool5 has no parameters: three parameterised layers in the FC group',
  );
});

t.test('condition 1 fails: the output layer alone is too expensive', async t => {
  const v = decideAlexNetLike([layer('head', 40, 1000), layer('body', 60, 10)]);
  t.equal(v.alexnetLike, false);
  t.equal(v.p, 0);
  t.match(
    v.reason,
    /condition 1 failed: the output layer head alone takes 40\.0% of compute, over the 25\.0% limit by 15\.0%/,
  );
});

t.test('condition 2 fails: too many parameters left behind, by how much', async t => {
  const v = decideAlexNetLike([layer('head', 5, 100), layer('conv', 95, 900)]);
  t.equal(v.alexnetLike, false);
  t.equal(v.p, 1);
  t.match(v.reason, /condition 2 failed: .* hold 90\.0% of the parameters, over the 25\.0% limit by 65\.0%/);
});

t.test('edge cases: one layer, all time in one layer, p = m, zero-parameter layers, custom conditions', async t => {
  const one = decideAlexNetLike([layer('only', 10, 10)]);
  t.equal(one.alexnetLike, false, `one layer: ${one.reason}`);
  const allInInput = decideAlexNetLike([layer('fc', 0, 1000), layer('act', 0, 0), layer('conv', 100, 10)]);
  t.equal(allInInput.p, 2, 'zero-time layers all fit');
  t.equal(allInInput.alexnetLike, true, allInInput.reason);
  const allInOutput = decideAlexNetLike([layer('fc', 100, 1000), layer('conv', 0, 10)]);
  t.equal(allInOutput.p, 0);
  t.equal(allInOutput.alexnetLike, false);
  const pm = decideAlexNetLike([layer('a', 1, 10), layer('b', 1, 10)], { timeShare: 1, paramShare: 0.25 });
  t.equal(pm.p, 2, 'p = m when every layer fits');
  t.equal(pm.alexnetLike, false);
  t.match(pm.reason, /no layer is left for a conv group/);
  const zeroParams = decideAlexNetLike([layer('gap', 1, 0), layer('pool', 1, 0), layer('conv', 98, 0)]);
  t.equal(zeroParams.convParamShare, 0, 'no parameters at all: share 0, no division by zero');
  const strict = decideAlexNetLike(alexnetLike, { timeShare: 0.1, paramShare: 0.25 });
  t.equal(strict.p, 2, 'a stricter time share stops earlier');
  t.equal(strict.alexnetLike, false, strict.reason);
  t.equal(decideAlexNetLike([]).alexnetLike, false);
});

// The decision's margin, computed two ways on fixed inputs: analytically from the cumulative time shares
// (decisionMargin), and by perturbing the times until the decision itself flips. Perturbing moves the
// cumulative share c(k) of the top k layers to a target, scaling the top k layers' times by one factor and
// the others' by another: every other c(j) moves the same way by less, so the verdict flips first where
// the margin says.
function withShare(layers: readonly LayerCost[], k: number, share: number): LayerCost[] {
  const total = layers.reduce((s, l) => s + l.forwardMs + l.backwardMs, 0);
  const top = layers.slice(0, k).reduce((s, l) => s + l.forwardMs + l.backwardMs, 0) / total;
  const a = share / top,
    b = (1 - share) / (1 - top);
  return layers.map((l, i) => ({
    ...l,
    forwardMs: l.forwardMs * (i < k ? a : b),
    backwardMs: l.backwardMs * (i < k ? a : b),
  }));
}

/** The smallest move of one cumulative share across the threshold that flips the verdict, found by trying each. */
function marginBySearch(layers: readonly LayerCost[]): number | null {
  const base = decideAlexNetLike(layers);
  const total = layers.reduce((s, l) => s + l.forwardMs + l.backwardMs, 0);
  let best: number | null = null,
    cum = 0;
  layers.forEach((l, i) => {
    cum += l.forwardMs + l.backwardMs;
    const c = cum / total,
      T = base.conditions.timeShare;
    if (i === layers.length - 1 || c === 0) return; // c(m) = 1 never moves; a zero share cannot be scaled
    const crossed = withShare(layers, i + 1, c > T ? T - 1e-9 : T + 1e-9);
    if (decideAlexNetLike(crossed).alexnetLike !== base.alexnetLike && (best === null || Math.abs(c - T) < best))
      best = Math.abs(c - T);
  });
  return best;
}

t.test('margin: how far the nearest verdict-flipping cumulative share is from the threshold', async t => {
  const v = decideAlexNetLike(alexnetLike);
  t.ok(Math.abs(v.margin.time! - 0.05) < 1e-12, `fc8+fc7+fc6 take 20%: 5 points below 25% (${v.margin.time})`);
  t.same(v.margin.nearestFlip?.layer, 'fc6');
  t.ok(Math.abs(v.margin.split! - 0.04) < 1e-12, 'p = 4 at 21%: 4 points from moving');
  t.ok(
    Math.abs(v.margin.parameters - (0.25 - v.convParamShare)) < 1e-12,
    "parameter margin: 25% minus the conv group's share",
  );
  t.match(
    marginSentence(v),
    /margin 5\.0 points of compute: the verdict flips if the top 3 layer\(s\), down to fc6, rose above 25\.0% \(now 20\.0%\)/,
  );
  const up = withShare(alexnetLike, 3, 0.25 + 1e-9),
    down = withShare(alexnetLike, 3, 0.25 - 1e-9);
  t.equal(
    decideAlexNetLike(up).alexnetLike,
    false,
    'just past the margin: fc6 leaves the FC group, 37M parameters stay behind',
  );
  t.equal(decideAlexNetLike(down).alexnetLike, true, 'just inside it: the verdict holds');
  const params = decideAlexNetLike([layer('head', 5, 100), layer('conv', 95, 900)]);
  t.equal(
    params.margin.time,
    null,
    'one split possible below the threshold, and the other has no conv group: no timing flips it',
  );
  t.match(marginSentence(params), /no measured time can change this verdict/);
});

t.test('margin, two ways, on fixed profiles: analytic = the smallest flip found by perturbing the times', async t => {
  t.equal(decideAlexNetLike(FIXED_PROFILES['alexnet (wasm)']).alexnetLike, true);
  t.ok(
    Math.abs(decideAlexNetLike(FIXED_PROFILES['alexnet (wasm)']).margin.time! - 0.0713) < 5e-4,
    'alexnet: 7.1 points, at fc6',
  );
  t.equal(decideAlexNetLike(FIXED_PROFILES['resnet-mini (wasm)']).alexnetLike, false);
  for (const [name, layers] of Object.entries(FIXED_PROFILES)) {
    const v = decideAlexNetLike(layers);
    const searched = marginBySearch(layers);
    if (v.margin.time === null) t.equal(searched, null, `${name}: no flip either way`);
    else
      t.ok(
        searched !== null && Math.abs(searched - v.margin.time) < 1e-9,
        `${name}: ${v.alexnetLike ? 'AlexNet-like' : 'not'}, margin ${v.margin.time.toFixed(4)} = by search ` +
          `${searched?.toFixed(4)}`,
      );
  }
});
