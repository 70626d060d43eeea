// The train hook fit's loop stands on: atEpochEnd is called once per epoch, after its last step (every device applied
// it, no step after it run), with the weights the devices hold then; resolving true ends the run after that step.
// Checked with a partial last batch (44 samples in batches of 8: 5 full batches, then 4), so an epoch is 6 steps.
import t from 'tap';
import { train, type EpochEnd } from '../src/index.js';

const config = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [8, 8, 1],
  classes: 4,
  datasetSize: 44,
  batch: 8,
  epochs: 4,
  devices: 2,
  backend: 'cpu' as const,
  partialBatch: true,
};

t.test('atEpochEnd: once per epoch with its weights; true ends the run after that epoch', async t => {
  const calls: { epoch: number; step: number; lastStepSeen: number }[] = [];
  let lastStep = 0;
  let weightsAtStop: Awaited<ReturnType<EpochEnd['weights']>> | undefined;
  const summary = await train(config, {
    onStep: m => void (lastStep = m.step),
    atEpochEnd: async end => {
      calls.push({ epoch: end.epoch, step: end.step, lastStepSeen: lastStep });
      if (end.epoch === 2) weightsAtStop = await end.weights();
      return end.epoch === 2;
    },
  });
  t.same(
    calls.map(c => [c.epoch, c.step]),
    [
      [1, 6],
      [2, 12],
    ],
    'epochs 1 and 2, after steps 6 and 12 (6 steps an epoch, the last one partial)',
  );
  t.same(
    calls.map(c => c.lastStepSeen),
    [6, 12],
    'no step after the epoch had run when the hook was called',
  );
  t.equal(summary.steps, 12, 'the run ended after epoch 2');
  t.equal(summary.stoppedAt, 12, 'as a stop');
  t.ok(weightsAtStop, 'the hook read the weights');
  t.same(
    weightsAtStop!.weights.map(w => [w.name, Array.from(w.values)]),
    summary.weights.map(w => [w.name, Array.from(w.values)]),
    "the weights it read are the run's final weights, bit for bit",
  );
  t.ok(
    summary.history.every(h => Number.isFinite(h.loss)),
    'every step, the partial ones included, has a finite loss',
  );
});

t.test('a hook that throws fails the run with its error', async t => {
  await t.rejects(
    train(config, {
      atEpochEnd: async () => {
        throw new Error('callback failed');
      },
    }),
    /callback failed/,
  );
});
