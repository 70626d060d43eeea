// Image inputs on a 0–255 scale (a data module returning raw pixel bytes as floats) get one warning before training,
// naming the module and the fix (divide by 255); they trained without a word. It is a warning, not an error: the run
// trains. Silent for normalised images ([0, 1], standardised), for 1-D features of any scale, and for the builtin
// datasets. Through the CLI it behaves as other warnings: a `warning:` line, a JSON event with --json, nothing with
// --quiet.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { train, type TrainConfig } from '../src/index.js';
import { IMAGE_INPUT_LIMIT, inputScaleWarning } from '../src/data/input-scale.js';
import type { Dataset } from '../src/data/dataset.js';
import { runTandem } from './fixtures/cli-process.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-input-scale-'));
const run: TrainConfig = { model: 'mlp', batch: 8, steps: 1, devices: 2, backend: 'cpu' };

/** A data module of 48 samples of `shape`, element j of sample i given by `value` (JS over i and j), label i % 2. */
function dataset(name: string, shape: number[], value: string): string {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `export default () => ({ size: 48, sampleShape: ${JSON.stringify(shape)}, classes: 2,
    read(i, out, offset) {
      for (let j = 0; j < ${shape.reduce((a, b) => a * b)}; j++) out[offset + j] = ${value};
      return i % 2;
    } });`,
  );
  return file;
}

const BYTES = '(i * 37 + j * 11) % 256';

/** The warnings a run of `config` gives, after it trained. */
async function warningsOf(config: TrainConfig): Promise<string[]> {
  const warnings: string[] = [];
  const summary = await train(config, {
    onEvent: e => {
      if (e.type === 'warning') warnings.push(e.message);
    },
  });
  if (summary.steps !== config.steps) throw new Error(`trained ${summary.steps} steps, not ${config.steps}`);
  return warnings;
}

t.test('0–255 image inputs: one warning naming the module, the largest value and the fix; the run trains', async t => {
  const data = dataset('raw-bytes', [6, 6, 1], BYTES);
  const warnings = await warningsOf({ ...run, data });
  t.equal(warnings.length, 1, 'one warning');
  t.match(
    warnings[0],
    /^data module .*raw-bytes\.mjs: image inputs reach 25\d \(sample \d+, of the 8 first-batch samples read\) \(a 0–255 scale: raw pixel bytes\?\); .*divide by 255 in read/,
  );
  t.equal(
    (await warningsOf({ ...run, data: dataset('16-bit', [4, 4], '(i * 997 + j * 131) % 65536') })).length,
    1,
    '16-bit values, [h, w] samples: warned too',
  );
});

t.test('silent for normalised images, for 1-D features of any scale, and for the builtin datasets', async t => {
  // The rule on the data modules themselves (inputScaleWarning: what train calls on the first batch's samples)...
  const first8 = Array.from({ length: 8 }, (_, i) => i);
  const ruled: [string, string][] = [
    ['standardised (about ±3)', dataset('standardised', [6, 6, 3], `((${BYTES}) / 255 - 0.45) / 0.22`)],
    [`at the limit (${IMAGE_INPUT_LIMIT})`, dataset('limit', [6, 6, 1], `j === 0 ? ${IMAGE_INPUT_LIMIT} : 0.5`)],
    ['1-D features of a large scale (a price, an age)', dataset('tabular', [4], '1000 * (i + j)')],
  ];
  for (const [name, file] of ruled) {
    const ds = ((await import(pathToFileURL(file).href)) as { default: () => Dataset }).default();
    t.equal(inputScaleWarning(ds, first8, file), undefined, `${name}: no warning`);
  }
  t.match(
    inputScaleWarning(
      (
        (await import(pathToFileURL(dataset('bytes-direct', [6, 6, 1], BYTES)).href)) as { default: () => Dataset }
      ).default(),
      first8,
      'x',
    ),
    /image inputs reach/,
    "and the same rule warns for bytes: the silences above are the rule's, not a check that never runs",
  );
  // ... and whole runs: a user module of normalised images, and the builtins (never checked).
  const silent: [string, TrainConfig][] = [
    ['bytes / 255', { ...run, data: dataset('scaled', [6, 6, 1], `${BYTES} / 255`) }],
    ['mnist', { ...run, data: 'mnist' }],
    ['synthetic-images', { ...run, data: 'synthetic-images', imageSize: [6, 6, 1], classes: 4, datasetSize: 64 }],
  ];
  for (const [name, config] of silent) t.same(await warningsOf(config), [], `${name}: no warning`);
});

t.test('the CLI: a warning line; with --json one warning event; with --quiet nothing', async t => {
  const data = dataset('raw-bytes-cli', [6, 6, 1], BYTES);
  const args = [
    'train',
    '--model',
    'mlp',
    '--data',
    data,
    '--batch',
    '8',
    '--steps',
    '1',
    '--devices',
    '2',
    '--backend',
    'cpu',
  ];
  const cliRun = (extra: string[]) =>
    runTandem([...args, ...extra]).then(r => ({ code: r.code === 0 ? 0 : 1, out: r.stdout + r.stderr }));
  const plain = await cliRun([]);
  t.equal(plain.code, 0, 'trains, exit 0');
  t.equal(
    plain.out.match(/^warning: data module .*raw-bytes-cli\.mjs: image inputs reach 25\d .*divide by 255/gm)?.length,
    1,
    'one warning line',
  );
  const json = await cliRun(['--json']);
  const events = json.out
    .split('\n')
    .filter(l => l.startsWith('{'))
    .map(l => JSON.parse(l) as { event: string; message?: string });
  t.equal(
    events.filter(e => e.event === 'warning' && /image inputs reach/.test(e.message ?? '')).length,
    1,
    '--json: one warning event',
  );
  const quiet = await cliRun(['--quiet']);
  t.equal(quiet.code, 0, '--quiet: trains, exit 0');
  t.notMatch(quiet.out, /image inputs reach/, '--quiet: no warning');
});
