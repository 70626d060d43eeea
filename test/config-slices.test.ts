// Each device thread receives its slice of the resolved configuration, not the whole of it: the fields its code reads,
// and none of the main thread's (outputs, checkpoints, the dataset, the world's rendezvous).
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveConfig } from '../src/index.js';
import { COMM_FIELDS, COMPUTE_FIELDS, commSlice, computeSlice } from '../src/actors/config-slices.js';
import { profileSlice } from '../src/profiling/profile-config.js';
import { withFault } from './fixtures/fault-plugin.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-slices-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const MAIN_ONLY = ['data', 'out', 'checkpointDir', 'checkpointEvery', 'resume', 'trace', 'rendezvous', 'datasetSize'];

t.test('compute, comm and profiler threads get their fields and nothing of the main thread', async t => {
  const cfg = await resolveConfig({
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    datasetSize: 64,
    devices: 2,
    steps: 2,
    backend: 'cpu',
    out: path.join(dir, 'out'),
    checkpointEvery: 1,
    ...withFault({ device: 1, step: 2, phase: 'forward', kind: 'throw' }),
  });
  for (const [name, slice, fields] of [
    ['compute', computeSlice(cfg), COMPUTE_FIELDS],
    ['comm', commSlice(cfg), COMM_FIELDS],
  ] as const) {
    t.same(Object.keys(slice).sort(), [...fields].sort(), `${name}: exactly its declared fields`);
    for (const key of MAIN_ONLY) t.notOk(key in slice, `${name}: no ${key}`);
    for (const key of fields)
      t.equal((slice as Record<string, unknown>)[key], (cfg as unknown as Record<string, unknown>)[key]);
    t.same(slice.pluginOptions, { faultInjection: { device: 1, step: 2, phase: 'forward', kind: 'throw' } });
    t.ok(Object.keys(slice).length < Object.keys(cfg).length, `${name}: a slice of ${Object.keys(cfg).length} fields`);
  }
  const profile = profileSlice(cfg);
  for (const key of MAIN_ONLY) t.notOk(key in profile, `profiler: no ${key}`);
  t.same(profile.model, cfg.model, 'profiler: the model it builds');
});
