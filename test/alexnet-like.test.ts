// The AlexNet-like decision (seed 000, claims 8-10) as a pure function on injected profiles.
import t from 'tap';
import { decideAlexNetLike, parameterisedSplit } from '../src/profiling/alexnet-like.js';
import type { LayerCost } from '../src/profiling/layer-profile.js';

const layer = (name: string, ms: number, parameters: number): LayerCost =>
  ({ name, className: 'X', forwardMs: ms / 2, backwardMs: ms / 2, parameters, bytes: parameters * 4, outputSize: 1 });

// Transmission order: output layer first.
const alexnetLike = [layer('fc8', 2, 40_000), layer('fc7', 8, 16_000_000), layer('fc6', 10, 37_000_000), layer('pool5', 1, 0),
  layer('conv5', 20, 900_000), layer('conv4', 25, 1_300_000), layer('conv3', 20, 900_000), layer('conv2', 10, 600_000), layer('conv1', 4, 35_000)];

t.test('AlexNet-like: p is the last layer within the time share; FC group first', async t => {
  const v = decideAlexNetLike(alexnetLike);
  t.equal(v.alexnetLike, true, v.reason);
  t.equal(v.p, 4, 'fc8, fc7, fc6, pool5 fit in 25% (21 of 100 ms); conv5 would break it');
  t.same(v.fcGroup, ['fc8', 'fc7', 'fc6', 'pool5']);
  t.same(v.convGroup, ['conv5', 'conv4', 'conv3', 'conv2', 'conv1']);
  t.ok(Math.abs(v.fcTimeShare - 0.21) < 1e-9);
  t.ok(v.convParamShare < 0.07);
  t.equal(parameterisedSplit(alexnetLike, v.p), 3, 'pool5 has no parameters: three parameterised layers in the FC group');
});

t.test('condition 1 fails: the output layer alone is too expensive', async t => {
  const v = decideAlexNetLike([layer('head', 40, 1000), layer('body', 60, 10)]);
  t.equal(v.alexnetLike, false);
  t.equal(v.p, 0);
  t.match(v.reason, /condition 1 failed: the output layer head alone takes 40\.0% of compute, over the 25\.0% limit by 15\.0%/);
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
