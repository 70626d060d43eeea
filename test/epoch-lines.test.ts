// tandem train's per-epoch lines: `epoch 2/3  loss 0.3000  acc 0.750  0.0 s`, the means over the epoch's steps, once
// each epoch's steps are over (and at a stop); none in --json or --quiet; no accuracy for a regression.
import t from 'tap';
import { ProgressDisplay } from '../src/cli/progress-display.js';
import type { StepMetrics } from '../src/index.js';

const metrics = (step: number, loss: number, accuracy: number): StepMetrics => ({
  step,
  loss,
  accuracy,
  lr: 0.01,
  samplesPerSecond: 100,
  stepMs: 1,
  computeMs: [1],
  numTensors: [0],
  dataWaitMs: 0,
});

/** What the display prints for a run of 3 epochs of 2 steps (losses 1..6, accuracies 0.5 or NaN), stopped or not. */
function printed(mode: { json: boolean; quiet: boolean }, accuracy: (step: number) => number, stopAfter = 6): string[] {
  const lines: string[] = [];
  const log = console.log;
  console.log = (text: string) => void lines.push(text);
  try {
    const d = new ProgressDisplay({ ...mode, tty: false });
    d.event({ type: 'started', devices: 2, backend: 'cpu', precision: 'fp32', method: 'data-parallel',
      strategy: 'sequential', steps: 6, firstStep: 1, stepsPerEpoch: 2 }); // prettier-ignore
    for (let step = 1; step <= stopAfter; step++) {
      if (step % 2 === 1) d.event({ type: 'epoch', epoch: (step + 1) / 2, step });
      d.step(metrics(step, step, accuracy(step)));
    }
    if (stopAfter < 6) d.event({ type: 'stopped', step: stopAfter });
    d.event({ type: 'finished', steps: stopAfter });
  } finally {
    console.log = log;
  }
  return lines.filter(l => /^epoch \d+\/\d+ /.test(l)).map(l => l.replace(/ [\d.]+ s$/, ' T s'));
}

t.test('one line per epoch: the means over its steps', async t => {
  t.same(
    printed({ json: false, quiet: false }, s => (s % 2 === 0 ? 1 : 0.5)),
    [
      'epoch 1/3  loss 1.5000  acc 0.750  T s',
      'epoch 2/3  loss 3.5000  acc 0.750  T s',
      'epoch 3/3  loss 5.5000  acc 0.750  T s',
    ],
  );
});

t.test('a stop mid-epoch: the line of the steps it trained', async t => {
  t.same(
    printed({ json: false, quiet: false }, () => 0.5, 3),
    ['epoch 1/3  loss 1.5000  acc 0.500  T s', 'epoch 2/3  loss 3.0000  acc 0.500  T s'],
  );
});

t.test('regression: no accuracy; --json and --quiet: no epoch lines', async t => {
  t.same(printed({ json: false, quiet: false }, () => NaN).slice(0, 1), ['epoch 1/3  loss 1.5000  T s']);
  t.same(
    printed({ json: true, quiet: false }, () => 0.5),
    [],
  );
  t.same(
    printed({ json: false, quiet: true }, () => 0.5),
    [],
  );
});

t.test("a run's epoch logs (validation): the line shows them, once per epoch", async t => {
  const lines: string[] = [];
  const log = console.log;
  console.log = (text: string) => void lines.push(text);
  try {
    const d = new ProgressDisplay({ json: false, quiet: false, tty: false });
    d.event({ type: 'started', devices: 2, backend: 'cpu', precision: 'fp32', method: 'data-parallel',
      strategy: 'sequential', steps: 4, firstStep: 1, stepsPerEpoch: 2 }); // prettier-ignore
    for (let step = 1; step <= 4; step++) {
      if (step % 2 === 1) d.event({ type: 'epoch', epoch: (step + 1) / 2, step });
      d.step(metrics(step, step, 0.5));
      const logs = { loss: step / 4, acc: 0.75, val_loss: step / 3, val_acc: 0.5 };
      if (step % 2 === 0) d.event({ type: 'epochEnd', epoch: step / 2, step, logs });
    }
    d.event({ type: 'finished', steps: 4 });
  } finally {
    console.log = log;
  }
  t.same(
    lines.filter(l => /^epoch \d+\/\d+ /.test(l)).map(l => l.replace(/ [\d.]+ s$/, ' T s')),
    [
      'epoch 1/2  loss 0.5000  acc 0.750  val_loss 0.6667  val_acc 0.500  T s',
      'epoch 2/2  loss 1.0000  acc 0.750  val_loss 1.3333  val_acc 0.500  T s',
    ],
  );
});
