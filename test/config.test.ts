// Bad configuration is refused with a clear TandemError before any thread starts.
import t from 'tap';
import { readFileSync, rmSync, writeFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';

function osThreads(): number {
  return Number(/Threads:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-config-'));
const wrongShapeModel = path.join(dir, 'wrong-shape.mjs');
writeFileSync(
  wrongShapeModel,
  `export default (tf) => tf.sequential({ layers: [tf.layers.dense({ inputShape: [5], units: 10 })] });`,
);
const fixedImageModel = path.join(dir, 'fixed-image.mjs');
writeFileSync(
  fixedImageModel,
  'export default (tf) => tf.sequential({ layers: [tf.layers.flatten({ inputShape: [12, 10, 1] }), ' +
    "tf.layers.dense({ units: 10, activation: 'softmax' })] });",
);
const noHeldOutData = path.join(dir, 'no-held-out.mjs');
writeFileSync(
  noHeldOutData,
  'export default () => ({ size: 64, sampleShape: [4], classes: 2, read(i, out) { out.fill(i / 64); return i % 2; } ' +
    '});',
);

const cases: [string, TrainConfig, string, RegExp][] = [
  ['0 devices', { devices: 0 }, 'BAD_CONFIG', /config\.devices/],
  ['fractional devices', { devices: 1.5 }, 'BAD_CONFIG', /config\.devices/],
  ['unknown model', { model: 'resnet-9000' }, 'UNKNOWN_MODEL', /unknown model 'resnet-9000'.*Builtins: mlp/],
  ['unknown dataset', { data: 'imagenet' }, 'UNKNOWN_DATASET', /unknown dataset 'imagenet'/],
  [
    'data folder not there',
    { data: 'no-such-images/' },
    'UNKNOWN_DATASET',
    /config\.data: no such folder or file: no-such-images\/ \(.*\); give an image folder/,
  ],
  [
    'data file not there',
    { data: 'train.jsonl' },
    'UNKNOWN_DATASET',
    /config\.data: no such folder or file: train\.jsonl/,
  ],
  ['batch not divisible', { devices: 3, batch: 32 }, 'BAD_CONFIG', /divisible by devices 3/],
  ['missing module', { model: './no/such/model.mjs' }, 'MODULE_NOT_FOUND', /no such file/],
  [
    'model shape does not match data',
    { model: wrongShapeModel, data: 'mnist' },
    'SHAPE_MISMATCH',
    /takes inputs of shape \[5\].*\[28, 28, 1\]$/,
  ],
  [
    "images of another size than the model's: the size to give",
    { model: fixedImageModel, data: 'synthetic-images' },
    'SHAPE_MISMATCH',
    /takes inputs of shape \[12, 10, 1\] .* gives \[32, 32, 3\]; give --image-size 12x10x1 \(config imageSize: \[12, 10, 1\]\)/,
  ],
  ['image too small for alexnet', { model: 'alexnet', data: 'mnist' }, 'SHAPE_MISMATCH', /at least 195x195/],
  ['unknown option', { devcies: 2 } as TrainConfig, 'BAD_CONFIG', /config\.devcies: unknown option/],
  // An option written as its flag (a --config file written from the command line): it listed every option, naming none.
  [
    'an option in kebab-case',
    { 'checkpoint-every': 1 } as TrainConfig,
    'BAD_CONFIG',
    /^config\.checkpoint-every: unknown option: did you mean checkpointEvery\? \(options, in a --config file too, are the API's camelCase names; the flags are kebab-case\)$/,
  ],
  [
    'an option in snake_case or lower case',
    { held_out: 10 } as TrainConfig,
    'BAD_CONFIG',
    /^config\.held_out: unknown option: did you mean heldOut\?/,
  ],
  [
    "another tool's name",
    { num_workers: 1 } as TrainConfig,
    'BAD_CONFIG',
    /^config\.num_workers: unknown option: did you mean loaderThreads\?/,
  ],
  [
    'an optimizer as tfjs names it',
    { optimizer: 'RMSProp' },
    'BAD_CONFIG',
    /got "RMSProp" \(did you mean rmsprop\?\)$/,
  ],
  ['a strategy in snake_case', { strategy: 'per_layer' as 'auto' }, 'BAD_CONFIG', /\(did you mean per-layer\?\)$/],
  ['another optimizer, near a name', { optimizer: 'adamw' }, 'BAD_CONFIG', /got "adamw"$/],
  ['unknown backend', { backend: 'opencl' as 'cpu' }, 'BAD_CONFIG', /config\.backend/],
  ['tensorflow backend not installed', { backend: 'tensorflow' }, 'BACKEND_UNAVAILABLE', /tfjs-node/],
  // the native engine's own options on another engine: they were ignored unsaid
  [
    'native threads on the cpu engine',
    { backend: 'cpu', nativeThreads: 4 },
    'BAD_CONFIG',
    /^config\.nativeThreads: applies to backend 'native' only, not 'cpu': give --backend native/,
  ],
  [
    'a dashboard address without a dashboard (ignored unsaid)',
    { dashboardHost: '0.0.0.0' },
    'BAD_CONFIG',
    /^config\.dashboardHost: is where the dashboard listens, and no dashboard was asked for: add --dashboard/,
  ],
  // a size for data that has its own samples: it trained all of mnist unsaid
  [
    'a dataset size for mnist',
    { data: 'mnist', datasetSize: 100 },
    'BAD_CONFIG',
    /^config\.datasetSize: applies to synthetic-images and data modules; data 'mnist' has its own samples/,
  ],
  [
    'classes for a CSV',
    { data: 'no-such.csv', labelColumn: 'y', classes: 3 },
    'BAD_CONFIG',
    /^config\.classes: .*data 'no-such\.csv' has its own samples \(its label column\)/,
  ],
  ['native fusion off on wasm', { backend: 'wasm', nativeFusion: false }, 'BAD_CONFIG', /nativeFusion: .*not 'wasm'/],
  ['steps and epochs', { steps: 3, epochs: 1 }, 'BAD_CONFIG', /steps or epochs/],
  ['negative lr', { lr: -1 }, 'BAD_CONFIG', /config\.lr/],
  [
    'batch larger than data',
    { data: 'synthetic-images', datasetSize: 10, batch: 16 },
    'BAD_CONFIG',
    /larger than the training samples/,
  ],
  [
    'fewer classes than devices (method B): the advice counts 2 labels a device',
    { method: 'local-head', data: 'synthetic-images', classes: 3, devices: 4, batch: 8 },
    'BAD_CONFIG',
    /config\.classes: method local-head: 3 classes cannot be shared among 4 devices, .*at least 2 labels.*at least 8 classes, at most 1 device\(s\), or --method partial-fc/,
  ],
  [
    'fewer classes than devices (partial-fc)',
    { method: 'partial-fc', data: 'synthetic-images', classes: 3, devices: 4, batch: 8 },
    'BAD_CONFIG',
    /cannot share 3 classes among 4 devices.*at most 3 devices/,
  ],
  [
    'a margin with a linear head (ignored before)',
    { method: 'local-head', data: 'synthetic-images', classes: 4, margin: 0.3 },
    'BAD_CONFIG',
    /config\.margin: applies to --head cosine only .*give --head cosine, or leave out --margin/,
  ],
  [
    'a scale with partial-fc (linear heads only)',
    { method: 'partial-fc', data: 'synthetic-images', classes: 4, scale: 10 },
    'BAD_CONFIG',
    /config\.scale: applies to --head cosine only .*--head cosine with --method local-head/,
  ],
  [
    'a device of one label (local-head: a softmax over one label trains nothing)',
    { method: 'local-head', data: 'synthetic-images', classes: 5, devices: 4, batch: 8 },
    'BAD_CONFIG',
    /config\.classes: method local-head: device 1 owns a single label \(2\) of 5 classes over 4 devices.*at least 8 classes, at most 2 device\(s\), or --method partial-fc/,
  ],
  [
    'a partition giving a device one label (local-head)',
    {
      method: 'local-head',
      data: 'synthetic-images',
      classes: 5,
      devices: 2,
      batch: 8,
      partition: [[0, 1, 2, 4], [3]],
    },
    'BAD_CONFIG',
    /config\.partition: method local-head: device 1 owns a single label \(3\).*a partition with 2 or more labels per device/,
  ],
  [
    'sample rate outside partial-fc',
    { method: 'local-head', data: 'synthetic-images', sampleRate: 0.5 },
    'BAD_CONFIG',
    /sampleRate: applies to --method partial-fc only/,
  ],
  [
    'classifier option on data-parallel',
    { embedding: 64 },
    'BAD_CONFIG',
    /config\.embedding: applies to --method local-head or partial-fc/,
  ],
  [
    'partition of the wrong device count',
    { method: 'local-head', data: 'synthetic-images', classes: 4, devices: 2, partition: [[0, 1, 2, 3]] },
    'BAD_CONFIG',
    /lists 1 devices but the run has 2/,
  ],
  ['unknown method', { method: 'model-parallel' as 'local-head' }, 'BAD_CONFIG', /config\.method/],
  ['unknown strategy', { strategy: 'fastest' as 'auto' }, 'BAD_CONFIG', /config\.strategy/],
  [
    'commHook auto without strategy auto',
    { commHook: 'auto' },
    'BAD_CONFIG',
    /config\.commHook: 'auto'.*needs strategy 'auto'/,
  ],
  ['bad link', { link: 'fast' }, 'BAD_CONFIG', /--link 'fast'/],
  // evalSamples beyond the held-out range: it evaluated the held-out samples there were, or none, without a word.
  [
    'evalSamples more than heldOut',
    { data: 'synthetic-images', datasetSize: 200, heldOut: 40, evalSamples: 100 },
    'BAD_CONFIG',
    /^config\.evalSamples: 100 is more than the 40 held-out samples \(heldOut is 40\): give evalSamples 40 or fewer \(--eval-samples 40\), or hold out more with heldOut 100 \(--held-out 100\)$/,
  ],
  [
    'evalSamples, nothing held out (data-parallel holds out none by default)',
    { evalSamples: 500 },
    'BAD_CONFIG',
    /^config\.evalSamples: evaluates 500 held-out samples, but none are held out \(the method's default heldOut is 0\): hold out samples for it with heldOut 500/,
  ],
  [
    "evalSamples more than a classifier method's default heldOut (10%)",
    { method: 'local-head', data: 'synthetic-images', classes: 4, datasetSize: 200, evalSamples: 100 },
    'BAD_CONFIG',
    /config\.evalSamples: 100 is more than the 20 held-out samples \(the method's default heldOut is 20\)/,
  ],
  [
    'evalSamples on a data module, nothing held out',
    { data: noHeldOutData, batch: 8, evalSamples: 10 },
    'BAD_CONFIG',
    /config\.evalSamples: evaluates 10 held-out samples, but none are held out/,
  ],
];

t.test('bad configs fail with a code and a message naming the field, and start no thread', async t => {
  await train({ devices: 0 }).catch(() => {}); // warm up lazy module loading
  for (const [name, config, code, message] of cases) {
    const before = osThreads();
    await t.rejects(train(config), { name: 'TandemError', code, message }, name);
    t.equal(osThreads(), before, `${name}: no thread started`);
  }
});

t.test('CLI flags map to the config; bad flags are named', async t => {
  const { config, json } = parseTrainArgs([
    '--model',
    'alexnet-mini',
    '--devices',
    '3',
    '--batch',
    '48',
    '--lr',
    '0.1',
    '--image-size',
    '16x16',
    '--all-reduce',
    'primary',
    '--json',
  ]);
  t.same(config, { model: 'alexnet-mini', devices: 3, batch: 48, lr: 0.1, imageSize: [16, 16], allReduce: 'primary' });
  t.equal(json, true);
  t.same(parseTrainArgs(['--backend', 'native', '--native-threads', '2', '--no-native-fusion']).config, {
    backend: 'native',
    nativeThreads: 2,
    nativeFusion: false,
  });
  t.throws(() => parseTrainArgs(['--devices', 'two']), { code: 'BAD_CONFIG', message: /--devices must be a number/ });
  t.throws(() => parseTrainArgs(['--bogus']), { code: 'BAD_CONFIG', message: /bogus/ });
});

t.test(
  'a --config file with a JSON syntax error: the line, the column and the line itself (it gave a character position)',
  async t => {
    const file = path.join(dir, 'syntax.json');
    writeFileSync(file, '{\n  "model": "mlp",\n  "batch": 8\n  "devices": 2\n}\n');
    t.throws(() => parseTrainArgs(['--config', file]), {
      code: 'BAD_CONFIG',
      message:
        /^--config .*syntax\.json: expected a JSON object of train options .*, found invalid JSON at line 4, column 3: `  "devices": 2` \(/,
    });
    writeFileSync(file, '{\r\n  "model": "mlp",\r\n}\r\n'); // a trailing comma, Windows line ends
    t.throws(() => parseTrainArgs(['--config', file]), {
      code: 'BAD_CONFIG',
      message: /found invalid JSON at line 3, column 1: `}` \(/,
    });
  },
);

t.test(
  '--data naming a file that is there, of a kind tandem does not read, says so (it said "no such file")',
  async t => {
    const here = mkdtempSync(path.join(os.tmpdir(), 'tandem-data-kind-'));
    writeFileSync(path.join(here, 'samples.txt'), '1 2 3\n');
    const previous = process.cwd();
    process.chdir(here); // a bare relative name: a module path starts with ./ or /
    t.teardown(() => {
      process.chdir(previous);
      rmSync(here, { recursive: true, force: true });
    });
    await t.rejects(train({ data: 'samples.txt' }), {
      code: 'UNKNOWN_DATASET',
      message:
        /^config\.data: samples\.txt \(.*samples\.txt\) is a \.txt file, which tandem does not read as data; give/,
    });
    await t.rejects(train({ data: 'absent.txt' }), { message: /^config\.data: no such folder or file: absent\.txt/ });
  },
);
