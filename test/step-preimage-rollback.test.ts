// The pre-update copy an elastic run keeps (actors/step-preimage.ts with every group copied): a host that completed
// step s rebuilds s, and s - 1 when a peer did not complete s (the regroup's roll back); without the last group's copy
// (a run that only checkpoints) s - 1 cannot be rebuilt. Driven as device 0's comm thread drives it: copy, then apply.
import t from 'tap';
import { StepPreimage } from '../src/actors/step-preimage.js';
import type { ParameterGroup } from '../src/model/parameter-layout.js';

const GROUPS = [
  { start: 0, end: 3 },
  { start: 3, end: 8 },
] as ParameterGroup[];
const TOTAL = 8;

/** Trains `steps` steps: each group's update sets its parameters to the step and its optimizer state to -step. */
function trained(steps: number, everyGroup: boolean) {
  const buffer = StepPreimage.allocate(GROUPS.length, TOTAL, 1);
  const preimage = new StepPreimage(buffer, GROUPS.length, TOTAL, 1);
  const params = new Float32Array(TOTAL);
  const state = [new Float32Array(TOTAL)];
  const applied = [0, 0];
  for (let step = 1; step <= steps; step++)
    GROUPS.forEach((g, i) => {
      preimage.save(i, GROUPS.length, g, step, params, state, everyGroup);
      params.fill(step, g.start, g.end);
      state[0].fill(-step, g.start, g.end);
      applied[i] = step;
    });
  const rebuild = (target?: number) => preimage.rebuild(GROUPS, g => applied[g], undefined, params, state, target);
  return { rebuild };
}

t.test('every group copied: the newest step, and the one before it', async t => {
  const { rebuild } = trained(5, true);
  const newest = rebuild()!;
  t.equal(newest.step, 5, 'the newest completed step');
  t.same([...newest.params], new Array(TOTAL).fill(5), 'its parameters: the live ones');
  const before = rebuild(4)!;
  t.equal(before?.step, 4, 'step 4 on request');
  t.same([...before.params], new Array(TOTAL).fill(4), 'its parameters: every group from the copy');
  t.same([...before.optimizerState[0]], new Array(TOTAL).fill(-4), 'its optimizer state too');
  t.equal(rebuild(3), undefined, 'no older step: the copy holds one');
});

t.test('the last group not copied (a run that only checkpoints): no step before the newest', async t => {
  const { rebuild } = trained(5, false);
  t.equal(rebuild()?.step, 5, 'the newest');
  t.equal(rebuild(4), undefined, 'step 4: the last group has no copy');
});
