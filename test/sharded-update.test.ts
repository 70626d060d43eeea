// localUpdate 'shard' (one process's devices: each comm thread reduces and updates 1/N of a group and writes it into
// every replica) against 'replica' (the default: each device all-reduces the group and updates its own replica), on
// real runs of worker threads: the same weights bit for bit and the same replica, for SGD with momentum and Adam,
// 2 and 3 devices, sequential, two-group and per-layer; a checkpoint written mid-run by the shard update resumes to
// the uninterrupted run's bits; the configurations where it does not apply resolve to 'replica'.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';
import { resolveConfig } from '../src/config.js';
import { checkpointPath } from '../src/checkpoint/checkpoint-file.js';

const BASE: TrainConfig = {
  model: 'alexnet-mini',
  data: 'synthetic-images',
  imageSize: [16, 16, 3],
  datasetSize: 256,
  steps: 4,
  seed: 5,
  lr: 0.02,
};
const bits = (s: TrainSummary) =>
  s.weights.map(w => Buffer.from(w.values.buffer, w.values.byteOffset, w.values.byteLength).toString('hex')).join('');

const CASES: [number, 'sgd' | 'adam', 'two-group' | 'sequential' | 'per-layer'][] = [
  [2, 'sgd', 'two-group'],
  [3, 'adam', 'sequential'],
  [2, 'adam', 'per-layer'],
];
for (const [devices, optimizer, strategy] of CASES) {
  t.test(`${devices} devices, ${optimizer}, ${strategy}: shard = replica, bit for bit`, async t => {
    const cfg: TrainConfig = {
      ...BASE,
      devices,
      batch: 4 * devices,
      optimizer,
      momentum: optimizer === 'sgd' ? 0.9 : undefined,
      strategy,
    };
    // every step's replicas compared: a difference fails the run
    const shard = await train({ ...cfg, localUpdate: 'shard', replicaCheckEvery: 1 });
    const replica = await train(cfg);
    t.equal(shard.config.localUpdate, 'shard', 'updated by shards');
    t.equal(replica.config.localUpdate, 'replica', 'the default updates per replica');
    t.equal(bits(shard), bits(replica), 'the same weights, bit for bit');
    t.equal(shard.replicaChecksum, replica.replicaChecksum, 'the same replica');
  });
}

t.test('a checkpoint of the shard update (optimizer state included) resumes to the uninterrupted run', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-shard-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cfg: TrainConfig = { ...BASE, devices: 2, batch: 8, optimizer: 'adam', steps: 6, localUpdate: 'shard' };
  const whole = await train({ ...cfg, checkpointDir: dir, checkpointEvery: 3 });
  const resumed = await train({ ...cfg, resume: checkpointPath(dir, 3) });
  t.equal(bits(resumed), bits(whole), '3 + 3 steps = 6 steps, bit for bit');
});

t.test('the default is replica; where the shard update does not apply, the run updates per replica', async t => {
  const cfg: TrainConfig = { ...BASE, devices: 2, batch: 8, localUpdate: 'shard' };
  const local = async (extra: TrainConfig) => (await resolveConfig({ ...cfg, ...extra })).localUpdate;
  t.equal(await local({}), 'shard');
  t.equal((await resolveConfig({ ...BASE, devices: 2, batch: 8 })).localUpdate, 'replica', 'the default');
  t.equal(await local({ devices: 1, batch: 4 }), 'replica', 'one device');
  t.equal(await local({ commHook: 'fp16' }), 'replica', 'a comm hook');
  t.equal(await local({ exchangeOrder: 'priority' }), 'replica', 'the priority order');
  t.equal(await local({ onNan: 'skip-step' }), 'replica', "onNan 'skip-step'");
  t.equal(await local({ allReduce: 'primary' }), 'replica', 'the primary all-reduce');
  await t.rejects(local({ localUpdate: 'half' as 'shard' }), /config.localUpdate/, 'an unknown value is named');
});
