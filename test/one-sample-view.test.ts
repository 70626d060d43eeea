// A data module's read(index, out, offset) gets a view of exactly one sample:
// writing past it is caught loudly (the first read of every shard is watched,
// and the main thread reads sample 0 before any thread starts) or, later,
// dropped: it can never reach a neighbour's sample.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { train } from '../src/index.js';
import loadShard, { type LoadShardTask } from '../src/data/load-shard-task.js';
import { SampleReader } from '../src/data/one-sample-view.js';
import { resolveDataset } from '../src/data/resolve-dataset.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-sample-view-'));
const PER = 4;
/**
 * A data module of 4-float samples (every element = the index) whose read writes `extra` floats past its sample when
 * `overrun(index)`.
 */
function overrunningModule(name: string, overrun: string, extra: number, how: 'index' | 'set' = 'index'): string {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `export default () => ({ size: 16, sampleShape: [${PER}], classes: 2,
    read(index, out, offset) {
      const n = ${PER} + ((${overrun}) ? ${extra} : 0);
      if ('${how}' === 'set') out.set(new Float32Array(n).fill(index), offset);
      else for (let k = 0; k < n; k++) out[offset + k] = index;
      return index % 2;
    } });`,
  );
  return pathToFileURL(file).href;
}

t.test(
  'the first read of a reader is watched: a write past the sample fails, naming the module, the sample and the element',
  async t => {
    const url = overrunningModule('always', 'true', 1);
    const ds = await resolveDataset({ source: url, options: { seed: 1 } });
    const out = new Float32Array(3 * PER).fill(-1);
    t.throws(() => new SampleReader(ds, url).read(5, out, PER), {
      code: 'BAD_DATA',
      message:
        /dataset .*always\.mjs: read\(5, out, 0\) wrote out\[4\], past its sample: out holds exactly one sample \(4 floats from offset 0\)/,
    });
    t.same(Array.from(out.subarray(2 * PER)), [-1, -1, -1, -1], 'the next sample is untouched');
    const viaSet = overrunningModule('set', 'true', 2, 'set');
    const dsSet = await resolveDataset({ source: viaSet, options: { seed: 1 } });
    t.throws(
      () => new SampleReader(dsSet, viaSet).read(3, out, 0),
      { code: 'BAD_DATA', message: /set\.mjs: read\(3, out, 0\) threw RangeError: .*exactly one sample: 4 floats/ },
      'out.set past the view throws, and is named',
    );
  },
);

t.test(
  "the loader: a later overrun is dropped, the neighbours keep their values; an overrun on a shard's first read " +
    'fails the load',
  async t => {
    const url = overrunningModule('odd', 'index % 2 === 1', 3);
    const inputs = new SharedArrayBuffer(4 * 4 * PER),
      labels = new SharedArrayBuffer(4 * 4);
    const x = new Float32Array(inputs);
    x.fill(-1);
    const task: LoadShardTask = {
      dataset: { source: url, options: { seed: 1 } },
      step: 1,
      indices: Int32Array.from([2, 7, 4]),
      inputs,
      inputOffset: 0,
      labels,
      labelOffset: 0,
    };
    t.same(await loadShard(task), { type: 'loaded', count: 3 });
    t.same(
      Array.from(x),
      [2, 2, 2, 2, 7, 7, 7, 7, 4, 4, 4, 4, -1, -1, -1, -1],
      'sample 7 wrote past its view: dropped; sample 4 and the next slot are intact',
    );
    const failed = await loadShard({ ...task, indices: Int32Array.from([7, 2]) });
    t.match(failed, {
      type: 'error',
      error: { code: 'BAD_DATA', message: /odd\.mjs: read\(7, out, 0\) wrote out\[4\], past its sample/ },
    });
  },
);

t.test('train(): a module writing past sample 0 is refused on the main thread, before any thread starts', async t => {
  await train({ devices: 0 }).catch(() => {}); // lazy module loading, outside the thread count
  const before = osThreads();
  await t.rejects(
    train({
      model: 'mlp',
      data: overrunningModule('train', 'true', 1),
      batch: 4,
      steps: 1,
      devices: 2,
      backend: 'cpu',
    }),
    { code: 'BAD_DATA', message: /train\.mjs: read\(0, out, 0\) wrote out\[4\], past its sample/ },
  );
  t.equal(osThreads(), before, 'no thread started');
});
