// A new user's data module, as people first write one: samples shorter than
// sampleShape (or written sparsely into an out assumed zero), NaN on sample 0,
// an async read, labels as strings or one-hot vectors, a held-out label out of
// range, a class, a named export or an object instead of a default factory.
// Each is BAD_DATA naming the module, the sample and the fix — before any
// thread where tandem can tell then — never a run on stale or wrong data.
import t, { type Test } from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-data-mistakes-'));
function file(name: string, contents: string): string {
  const p = path.join(dir, `${name}.mjs`);
  writeFileSync(p, contents);
  return p;
}

/**
 * 40 samples of 8 values, 3 classes; `read` is the body of read(i, out) (values i/40, label i % 3 unless it says
 * otherwise).
 */
function dataset(name: string, read: string, extra = ''): string {
  return file(
    name,
    `export default () => ({ size: 40, sampleShape: [8], classes: 3, read(i, out) { ${read} }, ${extra} });`,
  );
}

// Batch 36 = every training sample (4 held out), so step 1 reads each one.
const run: TrainConfig = { model: 'mlp', batch: 36, steps: 1, devices: 2, heldOut: 4, backend: 'cpu' };

t.before(async () => {
  await train({ devices: 0 }).catch(() => {});
}); // lazy module loading, outside the thread counts

async function refusedBeforeAnyThread(
  t: Test,
  data: string,
  message: RegExp,
  config: Partial<TrainConfig> = {},
): Promise<void> {
  const before = osThreads();
  await t.rejects(train({ ...run, data, ...config }), { name: 'TandemError', code: 'BAD_DATA', message });
  t.equal(osThreads(), before, 'no thread started');
}

t.test(
  "a sample shorter than sampleShape: named with the elements left unwritten (it trained on the previous batch's " +
    'values)',
  async t => {
    const later = dataset('short-later', 'out.set(new Float32Array(i === 17 ? 6 : 8).fill(i / 40)); return i % 3;');
    await t.rejects(train({ ...run, data: later }), {
      code: 'DATA_FAILED',
      message:
        /short-later\.mjs: read\(17, out, 0\) left out\[6\.\.7\] unwritten: a sample is 8 values \(sampleShape \[8\]\) and read must write every one, zeros included/,
    });
    await refusedBeforeAnyThread(
      t,
      dataset('short-first', 'out.set([1, 2, 3]); return i % 3;'),
      /read\(0, out, 0\) left out\[3\.\.7\] unwritten/,
    );
    await refusedBeforeAnyThread(
      t,
      dataset('sparse', 'out[i % 8] = 1; return i % 3;'),
      /read\(0, out, 0\) left out\[1\.\.7\] unwritten: .*out is not cleared beforehand/,
    );
    const dense = await train({
      ...run,
      data: dataset('sparse-cleared', 'out.fill(0); out[i % 8] = 1; return i % 3;'),
    });
    t.equal(dense.steps, 1, 'a read that clears out first trains');
  },
);

t.test('a NaN in sample 0 is refused before any thread', async t => {
  await refusedBeforeAnyThread(
    t,
    dataset('nan-first', 'out.fill(i / 40); out[5] = NaN; return i % 3;'),
    /sample 0 has a non-finite input value at element 5 \(NaN\)/,
  );
});

t.test(
  'labels that are no numbers: an async read, a one-hot vector, a class name — each named with its fix',
  async t => {
    await refusedBeforeAnyThread(
      t,
      dataset('async-read', 'return Promise.resolve(i % 3);'),
      /read\(0, out, offset\) returned a Promise; .*read must be synchronous .*load or decode the data in the factory, which may be async/,
    );
    await refusedBeforeAnyThread(
      t,
      dataset('one-hot', 'out.fill(0); const y = [0, 0, 0]; y[i % 3] = 1; return y;'),
      /returned \[1,0,0\]; .*not a number but a list: read returns the class id, not a one-hot vector/,
    );
    // Sample 0's label is a number: the string is met at loading, and shown as one (it read `label 2, outside [0, 3)`).
    await t.rejects(
      train({
        ...run,
        heldOut: 0,
        batch: 40,
        data: dataset('string-later', 'out.fill(i / 40); return i === 0 ? 0 : String(i % 3);'),
      }),
      {
        code: 'DATA_FAILED',
        message: /sample \d+ has label "\d", not a number but a string: return the class id/,
      },
    );
  },
);

t.test(
  'held-out samples: a bad label is refused before any thread (the evaluation read it as a class, or failed after ' +
    'training)',
  async t => {
    await refusedBeforeAnyThread(
      t,
      dataset('held-out-label', 'out.fill(i / 40); return i === 38 ? 7 : i % 3;'),
      /held-out-label\.mjs: sample 38 has label 7, outside \[0, 3\)/,
    );
    await refusedBeforeAnyThread(
      t,
      dataset('held-out-nan', 'out.fill(i === 37 ? NaN : i / 40); return i % 3;'),
      /sample 37 has a non-finite input value/,
    );
    const unevaluated = await train({
      ...run,
      evalSamples: 2,
      data: dataset('held-out-past-eval', 'out.fill(i / 40); return i === 39 ? 7 : i % 3;'),
    });
    t.equal(unevaluated.heldOut?.samples, 2, 'only the samples evaluated are read');
  },
);

t.test('method local-head: a label out of range is BAD_DATA, not a TypeError', async t => {
  const data = file(
    'local-head-label',
    `export default () => ({ size: 40, sampleShape: [8], classes: 4,
    read(i, out) { out.fill(i / 40); return i === 5 ? 4 : i % 4; } });`,
  );
  await t.rejects(train({ ...run, data, method: 'local-head', embedding: 8 }), {
    name: 'TandemError',
    code: 'BAD_DATA',
    message: /sample 5 has label 4, outside \[0, 4\)/,
  });
});

t.test(
  'a default export that is no factory: a class, named exports only, an object — each with the way out',
  async t => {
    const body = 'size = 40; sampleShape = [8]; classes = 3; read(i, out) { out.fill(i / 40); return i % 3; }';
    await t.rejects(train({ ...run, data: file('class', `export default class Digits { ${body} }`) }), {
      code: 'BAD_DATA',
      message:
        /found a class \(Digits\), which tandem cannot call without new: .*export default \(options\) => new Digits\(options\)/,
    });
    await t.rejects(
      train({
        ...run,
        data: file(
          'named',
          `export const SIZE = 40; export function makeDataset() { return new (class { ${body} })(); }`,
        ),
      }),
      {
        code: 'BAD_DATA',
        message:
          /found no default export, only named exports \(makeDataset\): make the factory the default, e.g\. export default makeDataset/,
      },
    );
    await t.rejects(train({ ...run, data: file('object', `export default new (class { ${body} })();`) }), {
      code: 'BAD_DATA',
      message: /found a default export of type object: export a function that returns it/,
    });
  },
);

t.test('a dataset smaller than one global batch: BAD_CONFIG with the largest batch that fits', async t => {
  const six = file(
    'six',
    'export default () => ({ size: 6, sampleShape: [8], classes: 3, read(i, out) { out.fill(i / 6); return i % 3; } ' +
      '});',
  );
  await t.rejects(train({ ...run, data: six, batch: 8, heldOut: 1 }), {
    code: 'BAD_CONFIG',
    message:
      /global batch 8 is larger than the training samples \(5 of 6; 1 held out\): give a batch of at most 4 \(a multiple of the 2 device\(s\)\), or hold out fewer/,
  });
  await t.rejects(train({ ...run, data: six, batch: 8, heldOut: 0, devices: 8 }), {
    code: 'BAD_CONFIG',
    message: /every device needs at least one sample per step/,
  });
});

t.test(
  '--classes, --dataset-size, --image-size that the data module ignores: BAD_CONFIG before any thread (it trained ' +
    "on the module's own, silently)",
  async t => {
    const fixed = dataset('ignores-options', 'out.fill(i / 40); return i % 3;');
    const cases: [Partial<TrainConfig>, RegExp][] = [
      [
        { classes: 5 },
        /--classes 5 \(config\.classes\) was given, but data module .*ignores-options\.mjs returned a dataset with classes 3: its factory does not use options\.classes\. Leave --classes out/,
      ],
      [
        { datasetSize: 20 },
        /--dataset-size 20 \(config\.datasetSize\) was given, but .* with size 40: its factory does not use options\.size/,
      ],
      [
        { imageSize: [4, 2] },
        /--image-size \[4, 2\] \(config\.imageSize\) was given, but .* with sampleShape \[8\]: its factory does not use options\.imageShape/,
      ],
    ];
    for (const [asked, message] of cases) {
      const before = osThreads();
      await t.rejects(train({ ...run, data: fixed, ...asked }), { code: 'BAD_CONFIG', message }, JSON.stringify(asked));
      t.equal(osThreads(), before, 'no thread started');
    }
    const honoured = file(
      'honours-options',
      `export default ({ classes = 3, size = 40 }) => ({ size, sampleShape: [8], classes,
    read(i, out) { out.fill(i / size); return i % classes; } });`,
    );
    const r = await train({ ...run, data: honoured, classes: 4, datasetSize: 44 });
    t.equal(r.steps, 1, 'a factory that builds what it is asked for trains');
    t.equal(
      (await train({ ...run, data: fixed, classes: 3, datasetSize: 40 })).steps,
      1,
      'options equal to what the module gives are accepted',
    );
  },
);
