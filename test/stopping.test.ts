// Ending a run from outside: a second SIGINT aborts a step that never finishes and checkpoints the last completed
// step; a stop that outlives its grace period does the same (API); SIGHUP stops like SIGINT; a closed stdout pipe
// does not stop training. Real processes and threads; every wait is on the process's own output.
import t from 'tap';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { start, train, TandemError, type TrainConfig } from '../src/index.js';
import { checkpointPath, readCheckpoint, type Checkpoint } from '../src/checkpoint/checkpoint-file.js';
import { spawnTandem } from './fixtures/cli-process.js';
import { withFault } from './fixtures/fault-plugin.js';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'tandem-stop-'));
const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  datasetSize: 300,
  batch: 12,
  devices: 2,
  backend: 'cpu',
  seed: 3,
};
const sameBits = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

/**
 * The checkpoint an uninterrupted run of `base` writes after 4 steps (every strategy gives the same bits: one run
 * serves all).
 */
let fourSteps: Promise<Checkpoint> | undefined;
function reference(): Promise<Checkpoint> {
  const dir = tmp();
  fourSteps ??= train({ ...base, steps: 4, checkpointEvery: 4, checkpointDir: dir }).then(() =>
    readCheckpoint(checkpointPath(dir, 4)),
  );
  return fourSteps;
}

function sameState(
  t: Pick<typeof import('tap').default, 'equal' | 'ok'>,
  got: Checkpoint,
  want: Checkpoint,
  what: string,
): void {
  t.equal(got.step, want.step, `${what}: step ${want.step}`);
  t.ok(sameBits(got.params, want.params), `${what}: the parameters of ${want.step} uninterrupted steps, bit for bit`);
  t.ok(
    got.optimizerState.every((s, j) => sameBits(s, want.optimizerState[j])),
    `${what}: and the optimizer state`,
  );
  t.equal(got.fingerprint, want.fingerprint, `${what}: resumable by the same run`);
}

t.test(
  'a second SIGINT aborts a step that never finishes: exit 130, checkpoint of the last completed step',
  async t => {
    const dir = tmp();
    const config = {
      ...base,
      steps: 1000,
      stallTimeoutMs: 120_000,
      ...withFault({ device: 1, step: 5, phase: 'forward', kind: 'hang' }),
    } as const;
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify(config));
    const cli = spawnTandem(
      ['train', '--config', file, '--checkpoint-dir', dir, '--stop-grace-ms', '600000', '--json'],
      fn => t.teardown(fn),
    );
    await cli.waitFor('stdout', /"step":4,/); // step 5 is posted right after this line; device 1 hangs in its forward
    cli.child.kill('SIGINT');
    await cli.waitFor('stderr', /SIGINT: finishing the current step/);
    const second = performance.now();
    cli.child.kill('SIGINT');
    const { code, at } = await cli.exited;
    t.equal(code, 130, 'exit code 130');
    t.comment(`exited ${((at - second) / 1000).toFixed(2)} s after the second SIGINT (the grace is 600 s)`);
    t.match(
      cli.stderr(),
      /run aborted: on request during step 5; checkpoint of step 4, the last step every device completed/,
    );
    sameState(t, await readCheckpoint(checkpointPath(dir, 4)), await reference(), 'abort checkpoint');
  },
);

t.test(
  "abort while the last reported step's update still lands: the checkpoint is of that step, not the one before",
  async t => {
    // Device 0's comm thread is held 1.5 s in step 4's update (a loaded machine): step 4's line is printed once every
    // device finished its backward, before that update lands. An abort then must not checkpoint step 3.
    const dir = tmp();
    const config = { ...base, steps: 1000, ...withFault({ device: 0, step: 4, phase: 'update', kind: 'slow' }) };
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify(config));
    const cli = spawnTandem(
      ['train', '--config', file, '--checkpoint-dir', dir, '--stop-grace-ms', '600000', '--json'],
      fn => t.teardown(fn),
    );
    await cli.waitFor('stdout', /"step":4,/);
    cli.child.kill('SIGINT');
    await cli.waitFor('stderr', /SIGINT: finishing the current step/);
    cli.child.kill('SIGINT');
    const { code } = await cli.exited;
    t.equal(code, 130, 'exit code 130');
    t.match(cli.stderr(), /run aborted: on request during step 5; checkpoint of step 4, the last step every device/);
    sameState(t, await readCheckpoint(checkpointPath(dir, 4)), await reference(), 'abort checkpoint');
  },
);

t.test(
  'stop() on a step whose update never completes: aborted after stopGraceMs, the half-applied step rolled back',
  async t => {
    const dir = tmp();
    // Device 1's comm thread hangs before applying step 5's first group (two-group): device 0 applies that group, never
    // the other.
    const run = start({
      ...base,
      strategy: 'two-group',
      steps: 1000,
      stallTimeoutMs: 120_000,
      stopGraceMs: 300,
      checkpointDir: dir,
      keepCheckpoints: 0,
      ...withFault({ device: 1, step: 5, phase: 'update', kind: 'hang' }),
    });
    const checkpoints: number[] = [];
    run.events$.subscribe(e => {
      if (e.type === 'checkpoint') checkpoints.push(e.step);
    });
    // Step 6 was posted while step 5 trained (its inputs loaded, no checkpoint due): the stop asked at step 5's metrics
    // ends the run after step 6.
    run.metrics$.subscribe(m => {
      if (m.step === 5) run.stop();
    });
    const err = await run.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof TandemError && err.code === 'ABORTED', 'done rejects with ABORTED');
    t.match(
      (err as Error).message,
      /step 6 did not reach its stop checkpoint within stopGraceMs \(300 ms\).*checkpoint of step 4/,
    );
    t.same(checkpoints, [4], 'a checkpoint event for step 4');
    sameState(t, await readCheckpoint(checkpointPath(dir, 4)), await reference(), 'grace checkpoint (two-group)');
  },
);

t.test('SIGHUP stops like SIGINT: checkpoint, exit 129', async t => {
  const dir = tmp();
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
      '--checkpoint-dir',
      dir,
      '--json',
    ],
    fn => t.teardown(fn),
  );
  await cli.waitFor('stdout', /"step":3,/);
  cli.child.kill('SIGHUP');
  const { code } = await cli.exited;
  t.equal(code, 129, 'exit code 129');
  const stopped = /stopped after step (\d+) on SIGHUP; checkpoint: (\S+)/.exec(cli.stderr());
  t.ok(stopped, 'says where it stopped and the checkpoint');
  t.equal((await readCheckpoint(stopped![2])).step, Number(stopped![1]), 'the checkpoint of that step');
});

t.test('stdout closed early (| head): printing stops, training goes on, the model is written', async t => {
  const out = tmp();
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
      '40',
      '--backend',
      'cpu',
      '--out',
      out,
      '--json',
    ],
    fn => t.teardown(fn),
  );
  await cli.waitFor('stdout', /"event":"started"/);
  cli.child.stdout.destroy(); // the reader goes away: the next write gets EPIPE
  const { code } = await cli.exited;
  t.equal(code, 0, `exit code 0 (stderr: ${cli.stderr().trim().split('\n').pop()})`);
  t.ok(
    existsSync(path.join(out, 'model.json')) && existsSync(path.join(out, 'weights.bin')),
    'model.json and weights.bin written',
  );
  t.notMatch(cli.stderr(), /EPIPE/, 'no EPIPE error');
});
