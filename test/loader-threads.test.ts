// `loaderThreads: 0`: the main thread loads the batches itself (the default of a process that has one CPU, where a
// loader thread only adds a round trip on the same core to every step). Against loaderThreads 1, on 2 devices:
// - the same bits: every step's loss and accuracy, the replicas' checksum; a builtin dataset and a data module;
// - no loader thread runs (its OS thread name, tdm-loader, absent), where one runs with 1;
// - a sample that cannot be trained on is refused the same way (DATA_FAILED, naming the device's step, phase load, and
//   the sample);
// - a streamed dataset (a module's tf.data dataset, whose ring the main thread fills) is still read by a loader thread;
// - the default: a process pinned to one CPU (taskset) runs no loader thread, one with two CPUs does.
import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTraining, train, type TrainConfig } from '../src/index.js';

const fixture = (file: string) => new URL(`../../test/fixtures/${file}`, import.meta.url).pathname;

const BASE: TrainConfig = {
  ...{ model: 'mlp', data: 'synthetic-images', imageSize: [6, 6, 1], datasetSize: 240, classes: 4, batch: 12 },
  ...{ steps: 8, devices: 2, backend: 'cpu', optimizer: 'sgd', lr: 0.05, momentum: 0.9, seed: 3 },
};

const dir = mkdtempSync(path.join(tmpdir(), 'tandem-loader-'));

/** A data module of 48 samples of 4 features, 3 classes; sample `bad` has label 7. */
function dataModule(name: string, bad: number): string {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `export default () => ({ size: 48, sampleShape: [4], classes: 3, read(index, out, offset) {
      for (let k = 0; k < 4; k++) out[offset + k] = ((index * 5 + k) % 7) / 7;
      return index === ${bad} ? 7 : index % 3; } });`,
  );
  return file;
}

/** A data module gives its own size, shape and classes. */
const MODULE = { imageSize: undefined, datasetSize: undefined, classes: undefined };

/** This process's tandem threads (their OS names), read at a step in the middle of the run. */
function threadNames(): string[] {
  return readdirSync('/proc/self/task')
    .map(id => readFileSync(`/proc/self/task/${id}/comm`, 'utf8').trim())
    .filter(n => n.startsWith('tdm-'))
    .sort();
}

async function run(loaderThreads: number, config: Partial<TrainConfig> = {}) {
  const r = startTraining({ ...BASE, ...config, loaderThreads } as TrainConfig);
  let names: string[] = [];
  r.metrics$.subscribe(m => {
    if (m.step === 4) names = threadNames();
  });
  const s = await r.done;
  return { history: s.history.map(h => [h.loss, h.accuracy]), checksum: s.replicaChecksum, names };
}

for (const [label, config] of [
  ['a builtin dataset', {}],
  ['a data module', { data: dataModule('good', -1), ...MODULE }],
] as const)
  t.test(`${label}: the main thread loads the same batches as a loader thread`, async t => {
    const main = await run(0, config);
    const thread = await run(1, config);
    t.same(main.history, thread.history, 'every step: the same loss and accuracy bits');
    t.equal(main.checksum, thread.checksum, 'the same replica bits');
    t.ok(new Set(main.history.map(h => h[0])).size > 1, 'the loss moved: training happened');
    t.notOk(main.names.includes('tdm-loader'), `0: no loader thread (${main.names.join(' ')})`);
    t.ok(thread.names.includes('tdm-loader'), `1: a loader thread (${thread.names.join(' ')})`);
  });

t.test('a sample that cannot be trained on is refused as from a loader thread', async t => {
  const file = dataModule('bad-label', 30);
  for (const loaderThreads of [0, 1])
    await t.rejects(
      train({ ...BASE, data: file, ...MODULE, shuffle: false, loaderThreads }),
      { code: 'DATA_FAILED', context: { step: 3, phase: 'load' }, message: /sample 30 has label 7, outside \[0, 3\)/ },
      `loaderThreads ${loaderThreads}`,
    );
});

t.test("a streamed dataset (a module's tf.data dataset) is read by a loader thread all the same", async t => {
  const config = { data: fixture('tfdata-batches.mjs'), ...MODULE, batch: 8, shuffle: false, partialBatch: true };
  const main = await run(0, { ...config, devices: 1, steps: 10 });
  const thread = await run(1, { ...config, devices: 1, steps: 10 });
  t.same(main.history, thread.history, 'the same bits');
  t.ok(main.names.includes('tdm-loader'), `a loader thread reads the ring (${main.names.join(' ')})`);
});

const taskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
t.test('by default, a process pinned to one CPU runs no loader thread', { skip: !taskset && 'no taskset' }, async t => {
  const script = fileURLToPath(new URL('./fixtures/loader-thread-names.js', import.meta.url));
  const names = (cpus: string) => execFileSync('taskset', ['-c', cpus, process.execPath, script], { encoding: 'utf8' });
  const one = names('0');
  t.match(one, /tdm-compute0/, 'one CPU: the run printed its threads');
  t.notMatch(one, /tdm-loader/, `one CPU: no loader thread (${one.trim().split('\n').join(' ')})`);
  if (spawnSync('taskset', ['-c', '0,1', 'true']).status === 0)
    t.match(names('0,1'), /tdm-loader/, 'two CPUs: a loader thread');
});
