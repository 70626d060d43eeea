// Checkpoints: resume is exact (both methods), damaged checkpoints are refused,
// an interrupted write leaves the previous one, --resume DIR falls back past a
// truncated or corrupt newest checkpoint (with a warning), SIGINT checkpoints and exits.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, type RunEvent, type TrainConfig } from '../src/index.js';
import { latestCheckpoint, readCheckpoint } from '../src/checkpoint/checkpoint-file.js';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'tandem-ckpt-'));
const same = (a: { values: Float32Array }[], b: { values: Float32Array }[]) =>
  a.every((w, i) => w.values.every((v, j) => v === b[i].values[j]));

for (const [name, extra] of [
  [
    'data-parallel, adam, two-group',
    { optimizer: 'adam', lr: 0.01, strategy: 'two-group', model: 'alexnet-mini', imageSize: [8, 8, 1] },
  ],
  ['local-head (method B), sgd+momentum', { method: 'local-head', embedding: 8, classes: 6, momentum: 0.9 }],
  [
    'partial-fc, sample rate 0.5',
    { method: 'partial-fc', embedding: 8, classes: 6, sampleRate: 0.5, optimizer: 'adam', lr: 0.01 },
  ],
] as [string, TrainConfig][]) {
  t.test(`resume is exact: ${name}`, async t => {
    const base: TrainConfig = {
      model: 'mlp',
      data: 'synthetic-images',
      imageSize: [6, 6, 1],
      datasetSize: 300,
      batch: 12,
      devices: 2,
      backend: 'cpu',
      seed: 7,
      ...extra,
    };
    const dir = tmp();
    // The uninterrupted run writes the checkpoints (model-state.test.ts shows writing them changes no bit).
    // 2 + 2 steps: the resumed steps start from the checkpoint's optimizer state and sampler position (the suite's
    // time).
    const full = await train({ ...base, steps: 4, checkpointEvery: 2, checkpointDir: dir });
    const atTwo = path.join(dir, 'checkpoint-000000002.tandem');
    t.ok(existsSync(atTwo), 'checkpoint written at step 2');
    const resumed = await train({ ...base, steps: 4, resume: atTwo });
    t.equal(resumed.firstStep, 3, 'continues at step 3; steps count from the start of the run');
    t.ok(same(resumed.weights, full.weights), '2 + 2 steps = 4 uninterrupted steps, bit for bit');
    t.same(
      resumed.history.map(h => h.loss),
      full.history.slice(2).map(h => h.loss),
      'same losses after the resume',
    );
    if (full.classifier) {
      // what the collectives carried is taken from the run's first step, 3 here (was step 1 only: 0 bytes, no
      // variables)
      t.ok(full.classifier.exchangedBytesPerStep > 0);
      t.equal(
        resumed.classifier?.exchangedBytesPerStep,
        full.classifier.exchangedBytesPerStep,
        'a resumed run reports what its steps exchange',
      );
      t.same(resumed.classifier?.carriedVariables, full.classifier.carriedVariables);
    }
  });
}

t.test('resume with other settings names them: the method, the classes, the embedding', async t => {
  const dir = tmp();
  const base: TrainConfig = {
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [6, 6, 1],
    datasetSize: 300,
    batch: 12,
    devices: 2,
    backend: 'cpu',
    method: 'local-head',
    classes: 6,
    embedding: 8,
  };
  await train({ ...base, steps: 2, checkpointEvery: 2, checkpointDir: dir });
  const resume = { ...base, steps: 4, resume: dir };
  await t.rejects(train({ ...resume, method: 'partial-fc' }), {
    code: 'BAD_CHECKPOINT',
    message:
      /other settings: method "local-head" in the checkpoint, "partial-fc" in this run; resume with the same settings/,
  });
  await t.rejects(train({ ...resume, classes: 8 }), {
    code: 'BAD_CHECKPOINT',
    message:
      /other settings: data\.options\.classes 6 in the checkpoint, 8 in this run; classifier\.partition \[\[0,1,2\],\[3,4,5\]\]/,
  });
  await t.rejects(train({ ...resume, embedding: 16 }), {
    code: 'BAD_CHECKPOINT',
    message:
      /different model .*variable \d+: logits\/kernel \[64,8\] in the checkpoint, logits\/kernel \[64,16\] in this run.*same --embedding/,
  });
});

t.test('damaged checkpoints are refused; an interrupted write leaves the previous one', async t => {
  const dir = tmp();
  const base: TrainConfig = {
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [6, 6, 1],
    datasetSize: 300,
    batch: 12,
    devices: 2,
    backend: 'cpu',
    steps: 4,
    checkpointEvery: 2,
    checkpointDir: dir,
  };
  await train(base);
  const latest = await latestCheckpoint(dir);
  t.match(path.basename(latest), /checkpoint-000000004\.tandem/);
  const bytes = readFileSync(latest);
  const truncated = path.join(dir, 'truncated.tandem');
  writeFileSync(truncated, bytes.subarray(0, bytes.length >> 1));
  await t.rejects(readCheckpoint(truncated), { code: 'BAD_CHECKPOINT', message: /truncated/ });
  const altered = Buffer.from(bytes);
  altered[altered.length - 100] ^= 0xff;
  const alteredFile = path.join(dir, 'altered.tandem');
  writeFileSync(alteredFile, altered);
  await t.rejects(readCheckpoint(alteredFile), { code: 'BAD_CHECKPOINT', message: /checksum does not match/ });
  await t.rejects(train({ ...base, steps: 6, checkpointEvery: undefined, resume: alteredFile }), {
    code: 'BAD_CHECKPOINT',
  });
  // A crash during the write of step 6's checkpoint: only a partial temporary file exists.
  writeFileSync(path.join(dir, 'checkpoint-000000006.tandem.tmp-12345'), bytes.subarray(0, 100));
  t.equal(await latestCheckpoint(dir), latest, 'the partial write is ignored; the latest complete checkpoint is used');
  t.equal((await readCheckpoint(latest)).step, 4);
  await t.rejects(
    train({ ...base, model: 'alexnet-mini', imageSize: [8, 8, 1], checkpointEvery: undefined, steps: 6, resume: dir }),
    { code: 'BAD_CHECKPOINT', message: /different model/ },
  );
  await t.rejects(train({ ...base, checkpointEvery: undefined, resume: dir }), { message: /nothing left to train/ });
  t.equal((await readCheckpoint(latest)).step, 4, 'the refusals left the checkpoint as it was');
  t.ok(readdirSync(dir).includes(path.basename(latest)));
});

t.test(
  '--resume DIR takes the newest checkpoint that reads back whole, warning of the newer ones; --resume FILE never ' +
    'substitutes',
  async t => {
    const dir = tmp();
    const base: TrainConfig = {
      model: 'mlp',
      data: 'synthetic-images',
      imageSize: [6, 6, 1],
      datasetSize: 300,
      batch: 12,
      devices: 2,
      backend: 'cpu',
      optimizer: 'adam',
      lr: 0.01,
    };
    const full = await train({ ...base, steps: 6, checkpointEvery: 2, checkpointDir: dir });
    const at = (step: number) => path.join(dir, `checkpoint-00000000${step}.tandem`);
    const whole = readFileSync(at(6));
    writeFileSync(at(6), whole.subarray(0, 1000)); // the machine died while copying it
    await t.rejects(readCheckpoint(at(6)), {
      code: 'BAD_CHECKPOINT',
      message: new RegExp(
        `checkpoint-000000006\\.tandem is truncated \\(1000 of ${whole.length} bytes\\): its write or copy did not ` +
          `finish`,
      ),
    });

    const events: RunEvent[] = [];
    const resumed = await train({ ...base, steps: 6, resume: dir }, { onEvent: e => events.push(e) });
    t.equal(resumed.firstStep, 5, 'resumed from step 4, the newest checkpoint that reads back whole');
    t.ok(
      same(resumed.weights, full.weights),
      'and continued exactly: 4 + 2 steps = the 6 steps of the run that wrote them',
    );
    t.match(
      events.find(e => e.type === 'warning'),
      {
        step: 0,
        message: new RegExp(
          `skipped 1 newer checkpoint\\(s\\) that do not read back whole — checkpoint-000000006\\.tandem: truncated ` +
            `\\(1000 of ${whole.length} bytes\\), ` +
            'its write or copy did not finish; resuming from checkpoint-000000004\\.tandem \\(step 4\\)',
        ),
      },
      'a warning names the skipped file and why',
    );

    // Naming the file: that file or nothing.
    await t.rejects(train({ ...base, steps: 8, resume: at(6) }), {
      code: 'BAD_CHECKPOINT',
      message: /checkpoint-000000006\.tandem is truncated \(1000 of \d+ bytes\)/,
    });

    // None readable: the error names every file and its problem.
    const altered = readFileSync(at(4));
    altered[altered.length - 100] ^= 0xff;
    writeFileSync(at(4), altered);
    writeFileSync(at(2), Buffer.alloc(0));
    await t.rejects(train({ ...base, steps: 8, resume: dir }), {
      code: 'BAD_CHECKPOINT',
      message:
        /none of its 3 checkpoint\(s\) reads back whole — checkpoint-000000006\.tandem: truncated \(1000 of \d+ bytes\), its write or copy did not finish; checkpoint-000000004\.tandem: corrupt: its checksum does not match its contents, it was altered or partly written; checkpoint-000000002\.tandem: empty \(0 bytes\)/,
    });
  },
);

t.test('SIGINT: the CLI finishes the step, checkpoints, exits non-zero, leaves no thread', async t => {
  const dir = tmp();
  const bin = fileURLToPath(new URL('../../bin/tandem.js', import.meta.url));
  const child = spawn(
    process.execPath,
    [
      bin,
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
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '',
    err = '';
  child.stdout.on('data', d => {
    out += d;
    if (out.includes('"step":3,') && !child.killed) child.kill('SIGINT');
  });
  child.stderr.on('data', d => {
    err += d;
  });
  const code = await new Promise<number | null>(resolve => child.on('exit', c => resolve(c)));
  t.equal(code, 130, `exit code 130 after SIGINT (stderr: ${err.trim().split('\n').pop()})`);
  t.match(err, /stopped after step \d+ on SIGINT; checkpoint: /);
  const ckpt = await readCheckpoint(await latestCheckpoint(dir));
  t.ok(ckpt.step >= 3, `checkpoint at step ${ckpt.step}`);
});
