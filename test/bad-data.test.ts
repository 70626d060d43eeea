// Data that cannot be trained on is refused at loading, naming the sample;
// a fault after a checkpoint leaves that checkpoint intact.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';
import { latestCheckpoint, readCheckpoint } from '../src/checkpoint/checkpoint-file.js';
import { withFault } from './fixtures/fault-plugin.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-data-'));
function dataModule(name: string, badIndex: number, bad: 'nan' | 'label'): string {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `export default () => ({
    size: 64, sampleShape: [4, 4, 1], classes: 3,
    read(index, out, offset) {
      for (let i = 0; i < 16; i++)
        out[offset + i] = (index === ${badIndex} && ${bad === 'nan'}) ? NaN : (index % 7) / 7;
      return index === ${badIndex} && ${bad === 'label'} ? 5 : index % 3;
    },
  });`,
  );
  return file;
}

t.test('a NaN input or a label out of range is refused at loading with the sample index', async t => {
  // Batch 64 = the whole dataset, so the bad sample is in the first batch.
  await t.rejects(
    train({ model: 'mlp', data: dataModule('nan', 17, 'nan'), batch: 64, steps: 1, devices: 2, backend: 'cpu' }),
    {
      code: 'DATA_FAILED',
      context: { step: 1, phase: 'load' },
      message: /sample 17 has a non-finite input value at element 0/,
    },
  );
  await t.rejects(
    train({ model: 'mlp', data: dataModule('label', 9, 'label'), batch: 64, steps: 1, devices: 2, backend: 'cpu' }),
    { code: 'DATA_FAILED', message: /sample 9 has label 5, outside \[0, 3\)/ },
  );
});

t.test('a device failing after a checkpoint leaves that checkpoint intact and resumable', async t => {
  const ckpt = mkdtempSync(path.join(os.tmpdir(), 'tandem-intact-'));
  const cfg: TrainConfig = {
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [6, 6, 1],
    datasetSize: 300,
    batch: 12,
    devices: 2,
    backend: 'cpu',
    checkpointDir: ckpt,
  };
  await t.rejects(
    train({
      ...cfg,
      steps: 6,
      checkpointEvery: 2,
      ...withFault({ device: 1, step: 5, phase: 'exchange', kind: 'exit' }),
    }),
    { code: 'WORKER_EXITED' },
  );
  const latest = await latestCheckpoint(ckpt);
  t.equal((await readCheckpoint(latest)).step, 4, 'the step-4 checkpoint is complete and verified');
  const resumed = await train({ ...cfg, steps: 6, resume: ckpt });
  t.equal(resumed.firstStep, 5);
});

t.test('cosine heads with an angular margin train (local-head); partial-fc refuses them', async t => {
  const s = await train({
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [6, 6, 1],
    classes: 6,
    datasetSize: 300,
    batch: 12,
    steps: 20,
    devices: 2,
    backend: 'cpu',
    method: 'local-head',
    head: 'cosine',
    margin: 0.2,
    scale: 16,
    embedding: 8,
    optimizer: 'adam',
    lr: 0.01,
  });
  t.ok(
    Number.isFinite(s.finalLoss) && s.finalLoss < s.history[0].loss,
    `loss falls: ${s.history[0].loss.toFixed(3)} -> ${s.finalLoss.toFixed(3)}`,
  );
  await t.rejects(train({ model: 'mlp', data: 'synthetic-images', classes: 6, method: 'partial-fc', head: 'cosine' }), {
    code: 'BAD_CONFIG',
    message: /partial-fc supports --head linear only/,
  });
});
