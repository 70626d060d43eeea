// The dataset interface as a user meets it: a --data that is no ES module is
// refused saying what a dataset is; the builtin mlp trains on samples of any
// shape; a dataset's label(index) that disagrees with read() is named (method
// local-head partitions the samples by label(), so it would train the wrong ones).
import t from 'tap';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-data-interface-'));
function file(name: string, contents: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, contents);
  return p;
}

/**
 * 1-D samples of 8 floats, 4 classes; `label` (JS source of a function body of `index`, or none) is the dataset's
 * label(index).
 */
function vectors(name: string, label?: string): string {
  return file(
    `${name}.mjs`,
    `export default () => ({
    size: 96, sampleShape: [8], classes: 4,
    read(index, out, offset) {
      const y = (index + 2) % 4;
      for (let k = 0; k < 8; k++) out[offset + k] = (k % 4 === y ? 1 : 0) + 0.01 * (index % 5);
      return y;
    },
    ${label ? `label(index) { ${label} },` : ''}
  });`,
  );
}

const run: TrainConfig = { model: 'mlp', batch: 8, steps: 3, devices: 2, backend: 'cpu' };
/** A model module taking 1-D samples (the label() test does not lean on mlp). */
const dense = file(
  'dense.mjs',
  `export default (tf, { inputShape, classes }) => tf.sequential({
  layers: [tf.layers.dense({ inputShape, units: 16, activation: 'relu' }), tf.layers.dense({ units: classes })] });`,
);

t.before(async () => {
  await train({ devices: 0 }).catch(() => {});
}); // lazy module loading, outside the thread counts

t.test(
  '--data FILE.json, --data DIR without class folders: BAD_DATA saying what a dataset is, naming the file, ' +
    'before any thread',
  async t => {
    const json = file('model.json', '{"modelTopology": {}}');
    const folder = path.join(dir, 'folder');
    mkdirSync(folder);
    const before = osThreads();
    await t.rejects(train({ ...run, data: json }), {
      name: 'TandemError',
      code: 'BAD_DATA',
      message: new RegExp(
        `--data ${json.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is a \\.json file, not an ES module .*a dataset is ` +
          `an ES module .*default export .*read\\(index, out, offset\\).*A model\\.json goes to --model`,
      ),
    });
    await t.rejects(train({ ...run, data: folder }), {
      code: 'BAD_DATA',
      message: /--data .*folder: an image folder has one subfolder per class .* or give a data module/,
    });
    t.equal(osThreads(), before, 'no thread started');
  },
);

t.test('the builtin mlp trains on 1-D samples; an image model refused on them names mlp', async t => {
  const data = vectors('plain');
  const summary = await train({ ...run, data });
  t.equal(summary.steps, 3, 'mlp trained on samples of shape [8]');
  t.ok(Number.isFinite(summary.finalLoss));
  const local = await train({ ...run, data, method: 'local-head', embedding: 8 });
  t.equal(local.steps, 3, "and as method B's feature extractor");
  await t.rejects(train({ ...run, data, model: 'alexnet-mini' }), {
    code: 'SHAPE_MISMATCH',
    message:
      /model 'alexnet-mini' needs images \[height, width, channels\] of at least 8x8; .*gives samples of shape \[8\]\. Use --model mlp/,
  });
});

t.test(
  'a dataset that names its classes (classNames) has them written to labels.json; a wrong list is named',
  async t => {
    const named = file(
      'named.mjs',
      `export default () => ({ size: 16, sampleShape: [4], classes: 2, classNames: ['no', 'yes'],
    read(index, out) { for (let k = 0; k < 4; k++) out[k] = (index + k) % 2; return index % 2; } });`,
    );
    const out = path.join(dir, 'named-out');
    await train({ ...run, data: named, steps: 1, out });
    t.same(JSON.parse(readFileSync(path.join(out, 'labels.json'), 'utf8')), ['no', 'yes']);
    const wrong = file('wrong-names.mjs', readFileSync(named, 'utf8').replace("['no', 'yes']", "['no']"));
    await t.rejects(train({ ...run, data: wrong, steps: 1 }), {
      code: 'BAD_DATA',
      message: /wrong-names\.mjs: classNames: expected a list of 2 strings \(one name per class, in label order\)/,
    });
  },
);

t.test(
  'label(index) that disagrees with read(): BAD_DATA on sample 0 before any thread; on a later sample at loading, ' +
    'naming it and both labels',
  async t => {
    const before = osThreads();
    await t.rejects(
      train({
        ...run,
        model: dense,
        data: vectors('off-by-one', 'return (index + 3) % 4;'),
        method: 'local-head',
        embedding: 8,
      }),
      {
        code: 'BAD_DATA',
        message:
          /off-by-one\.mjs: label\(0\) returned 3, but read\(0, out, offset\) returned 2; label\(index\) must return the label read returns/,
      },
    );
    t.equal(osThreads(), before, 'no thread started');
    // Labels 0 and 1 swapped by label(): both are device 0's, so without the check device 0 trains each sample under
    // the other label, silently.
    const swapped = vectors('swapped', 'const y = (index + 2) % 4; return y < 2 ? 1 - y : y;');
    const err = await train({ ...run, model: dense, data: swapped, method: 'local-head', embedding: 8 }).catch(
      (e: Error) => e,
    );
    t.match(err, {
      code: 'DATA_FAILED',
      message: /swapped\.mjs: label\((\d+)\) returned ([01]), but read\(\1, out, offset\) returned [01]/,
    });
    t.match((err as Error).cause, { code: 'BAD_DATA' });
    // Data-parallel reads every sample through the same loaders: the same check.
    await t.rejects(train({ ...run, model: dense, data: swapped }), {
      code: 'DATA_FAILED',
      message: /label\(\d+\) returned [01], but read/,
    });
    // A label() that agrees trains as before.
    t.equal(
      (
        await train({
          ...run,
          model: dense,
          data: vectors('agrees', 'return (index + 2) % 4;'),
          method: 'local-head',
          embedding: 8,
        })
      ).steps,
      3,
    );
  },
);
