// Paths a new user takes through the CLI and the library, each refused with a
// TandemError that names the culprit (before any thread starts where it can):
// a config that is not an object or holds NaN, a one-class classifier, hooks
// that are not functions, a resume with other settings or another model shape
// (the message names what differs), and a `tandem trace` file that is not
// tandem's trace. More in user-paths-refusals.test.ts.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { existsSync, readdirSync } from 'node:fs';
import { startTraining, train, type TrainConfig, type TrainHooks } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';
import { runTandem, spawnTandem } from './fixtures/cli-process.js';

import { SMALL_RUN } from './fixtures/small-run.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-user-paths-'));
const base: TrainConfig = SMALL_RUN;

const runCli = (args: string[]) => runTandem(args);

t.test('a config that is not an object, NaN, one class: BAD_CONFIG naming it, before any thread', async t => {
  await train({ devices: 0 }).catch(() => {}); // lazy module loading first
  const cases: [string, unknown, RegExp][] = [
    [
      'an array (it used to train mlp on mnist with every default)',
      [],
      /^config: expected an object of train options .*found an array/,
    ],
    ['null', null, /^config: expected an object of train options .*found null/],
    [
      'NaN devices (shown as NaN, not null)',
      { ...base, devices: NaN },
      /config\.devices: must be an integer in \[1, 64\], got NaN$/,
    ],
    ['Infinity steps', { ...base, steps: Infinity }, /config\.steps: .* got Infinity$/],
    [
      'one class (it used to fail at step 1 on a device: oneHot depth)',
      { ...base, classes: 1 },
      /config\.classes: a classifier needs 2 or more classes.*has 1; give --classes 2 or more/,
    ],
  ];
  for (const [name, config, message] of cases) {
    const before = osThreads();
    await t.rejects(train(config as TrainConfig), { name: 'TandemError', code: 'BAD_CONFIG', message }, name);
    t.equal(osThreads(), before, `${name}: no thread started`);
  }
});

t.test('hooks: null is none; anything but functions is BAD_CONFIG, from train and from startTraining', async t => {
  const summary = await train(base, null as unknown as TrainHooks); // a JavaScript caller's "no hooks"
  t.equal(summary.steps, 2, 'null hooks: the run trains (it used to end in a TypeError after training)');
  const before = osThreads();
  await t.rejects(train(base, 5 as unknown as TrainHooks), {
    code: 'BAD_CONFIG',
    message: /^hooks: expected an object of callbacks/,
  });
  await t.rejects(train(base, { onStep: 5 } as unknown as TrainHooks), {
    code: 'BAD_CONFIG',
    message: /^hooks\.onStep: expected a function, found number/,
  });
  const run = startTraining(base, { onEvent: 'log' } as unknown as TrainHooks);
  const events: string[] = [];
  run.events$.subscribe(e => events.push(e.type));
  await t.rejects(
    run.done,
    { code: 'BAD_CONFIG', message: /^hooks\.onEvent: expected a function, found string/ },
    'startTraining: done rejects with the culprit (it used to be a TypeError without a code)',
  );
  t.same(events, ['failed'], "the failure is the stream's one event");
  t.equal(osThreads(), before, 'no thread started');
});

t.test('resuming with other settings names each one, checkpoint against this run', async t => {
  const ckpt = path.join(dir, 'ckpt');
  await train({ ...base, steps: 2, checkpointEvery: 2, checkpointDir: ckpt });
  await t.rejects(train({ ...base, steps: 4, resume: ckpt, lr: 0.5, devices: 1, batch: 4 }), {
    code: 'BAD_CHECKPOINT',
    message:
      /other settings: optimizer\.lr 0\.01 in the checkpoint, 0\.5 in this run; devices 2 in the checkpoint, 1 in this run; batch 8 in the checkpoint, 4 in this run; resume with the same settings/,
  });
  await t.rejects(
    train({ ...base, steps: 4, resume: ckpt, optimizer: 'adam' }),
    {
      code: 'BAD_CHECKPOINT',
      message:
        /optimizer \{"kind":"sgd","lr":0\.01,"momentum":0\.9\} in the checkpoint, \{"kind":"adam",.*\} in this run/,
    },
    'another optimizer: shown whole',
  );
  await t.rejects(
    train({ ...base, steps: 4, resume: ckpt, imageSize: [7, 7, 1] }),
    {
      code: 'BAD_CHECKPOINT',
      message:
        /different model \(6 variables in the checkpoint, 6 in this run; variable 0: dense_Dense1\/kernel \[36,\d+\] in the checkpoint, dense_Dense1\/kernel \[49,\d+\] in this run\)/,
    },
    'same variable names, other shapes: the first differing variable with both shapes',
  );
  const resumed = await train({ ...base, steps: 4, resume: ckpt, strategy: 'per-layer' });
  t.equal(resumed.firstStep, 3, 'the same settings (another strategy) resume');
});

t.test("tandem trace: a file that is not tandem's trace is named with the event at fault, no stack trace", async t => {
  const write = (name: string, text: string) => {
    const p = path.join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const out = path.join(dir, 'x.svg');
  const cases: [string, string, RegExp][] = [
    [
      'a null event (it used to end in a TypeError stack)',
      write('null-event.json', '{"traceEvents":[null]}'),
      /traceEvents\[0\] is null, not an event object/,
    ],
    [
      'a complete event without ts',
      write(
        'no-ts.json',
        '{"traceEvents":[{"ph":"M","name":"m"},{"ph":"X","name":"forward","pid":0,"tid":0,"dur":1}]}',
      ),
      /traceEvents\[1\] \("forward"\) has ts missing, where a number is needed/,
    ],
    [
      'a step that is not an integer (it used to say "the trace holds steps NaN-NaN")',
      write(
        'bad-step.json',
        '{"traceEvents":[{"ph":"X","name":"forward","ts":0,"dur":5,"pid":0,"tid":0,"args":{"step":"x"}}]}',
      ),
      /traceEvents\[0\] \("forward"\) has args\.step "x", where an integer is needed/,
    ],
    ['a missing file', path.join(dir, 'no-such-trace.json'), /cannot read it: no such file or directory \(ENOENT\)/],
    [
      'broken JSON',
      write('broken.json', '{"traceEvents":['),
      /found invalid JSON \(.*the file has 16 characters: truncated\?\)/,
    ],
  ];
  for (const [name, file, message] of cases) {
    const r = await runCli(['trace', file, '--svg', out]);
    t.equal(r.code, 1, `${name}: exit 1`);
    t.match(r.stderr, /^tandem: tandem trace /, `${name}: a tandem error`);
    t.match(r.stderr, message, name);
    t.notMatch(r.stderr, /\n\s+at /, `${name}: no stack trace`);
  }
});

t.test(
  'no tfjs greeting telling the user to install tfjs-node (--backend cpu devices, a model file checked on the main ' +
    'thread)',
  async t => {
    const saved = path.join(dir, 'saved');
    await train({ ...base, out: saved });
    const r = await runCli([
      'train',
      '--model',
      path.join(saved, 'model.json'),
      '--data',
      'synthetic-images',
      '--image-size',
      '6x6x1',
      '--classes',
      '4',
      '--dataset-size',
      '64',
      '--batch',
      '8',
      '--steps',
      '2',
      '--devices',
      '2',
      '--backend',
      'cpu',
      '--quiet',
    ]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /^done: 2 steps on 2 device\(s\) \(cpu\)/m);
    t.notMatch(
      r.stderr,
      /tfjs-node|looks like you are running TensorFlow\.js/,
      'stderr holds no tfjs greeting (it had one per cpu thread and one for the model check)',
    );
  },
);

t.test(
  'the streams are hot, as the README says: a late subscriber gets complete alone; done still holds the result',
  async t => {
    const run = startTraining(base);
    const early: string[] = [];
    run.events$.subscribe(e => early.push(e.type));
    const summary = await run.done;
    const late = { values: 0, completed: false };
    for (const stream of [run.events$, run.metrics$, run.timeline$] as const) {
      (stream as import('rxjs').Observable<unknown>).subscribe({
        next: () => {
          late.values++;
        },
        complete: () => {
          late.completed = true;
        },
      });
    }
    t.same(late, { values: 0, completed: true }, 'nothing replayed, completed at once');
    t.equal(early[0], 'started', 'a subscriber of the same tick sees started');
    t.equal((await run.done).steps, summary.steps, 'done resolves again with the same summary');
  },
);

t.test(
  'a third stop signal exits at once and leaves no run lock behind (it used to leave .tandem-run.lock in --out)',
  async t => {
    const out = path.join(dir, 'third-signal');
    const cli = spawnTandem(
      [
        'train',
        '--model',
        'mlp',
        '--data',
        'synthetic-images',
        '--image-size',
        '6x6x1',
        '--dataset-size',
        '300',
        '--batch',
        '12',
        '--steps',
        '100000',
        '--backend',
        'cpu',
        '--out',
        out,
        '--json',
      ],
      fn => t.teardown(fn),
    );
    await cli.waitFor('stdout', /"step":3,/);
    t.ok(existsSync(path.join(out, '.tandem-run.lock')), 'the run holds its lock');
    // Three distinct stop signals at once (the same signal twice could merge while pending): stop, abort, exit.
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) cli.child.kill(sig);
    const { code } = await cli.exited;
    t.match(cli.stderr(), /a third time: exiting now/, 'the third signal exited on the spot');
    t.ok(code === 129 || code === 130 || code === 143, `128 + the first signal's number (${code})`);
    t.notOk(readdirSync(out).includes('.tandem-run.lock'), 'no run lock left');
  },
);
