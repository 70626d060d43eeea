// Every file or module a user hands tandem — model.json and its weights, a
// model or data module, a --config file, the command's numbers — that cannot
// be loaded or is malformed is refused with a TandemError naming the file and
// what was expected against what was found, before any thread starts.
import t from 'tap';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { resolveConfig, train, type TrainConfig } from '../src/index.js';
import { modelArtifacts, writeModelFiles } from '../src/actors/model-files.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { profileModel } from '../src/profiling/profile-model.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-user-files-'));
const data: TrainConfig = {
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 64,
  batch: 8,
  steps: 2,
  devices: 2,
  backend: 'cpu',
};
type Asserts = Pick<typeof t, 'rejects' | 'equal'>;

function file(name: string, contents: string | Uint8Array): string {
  const p = path.join(dir, name);
  mkdirSync(path.dirname(p), { recursive: true });
  writeFileSync(p, contents);
  return p;
}

/** A saved TF.js layers model (model.json + weights.bin) in `sub`, and its files' contents. */
async function savedModel(sub: string): Promise<{ modelJson: string; json: string; weights: Buffer }> {
  await tf.setBackend('cpu');
  const model = tf.sequential({
    layers: [tf.layers.flatten({ inputShape: [6, 6, 1] }), tf.layers.dense({ units: 4, activation: 'softmax' })],
  });
  await writeModelFiles(path.join(dir, sub), await modelArtifacts(tf, model));
  const modelJson = path.join(dir, sub, 'model.json');
  return {
    modelJson,
    json: readFileSync(modelJson, 'utf8'),
    weights: readFileSync(path.join(dir, sub, 'weights.bin')),
  };
}

/** `config` is refused with `code` and a message matching `message`, and no thread started. */
async function refused(t: Asserts, config: TrainConfig, code: string, message: RegExp, name: string): Promise<void> {
  const before = osThreads();
  await t.rejects(train({ ...data, ...config }), { name: 'TandemError', code, message }, name);
  t.equal(osThreads(), before, `${name}: no thread started`);
}

t.before(async () => {
  await train({ devices: 0 }).catch(() => {});
}); // lazy module loading, outside the thread counts

t.test('model.json and weights.bin: truncated, empty, {}, not a model, weights short or missing', async t => {
  const { json, weights } = await savedModel('good');
  const named = (sub: string) => path.join(dir, sub, 'model.json').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  file('truncated/model.json', json.slice(0, 100));
  file('truncated/weights.bin', weights);
  await refused(
    t,
    { model: path.join(dir, 'truncated/model.json') },
    'BAD_MODEL',
    new RegExp(
      `model ${named('truncated')}: expected a TensorFlow.js layers model .*found invalid JSON .*100 characters: ` +
        `truncated`,
    ),
    'truncated model.json',
  );
  file('empty/model.json', '');
  await refused(
    t,
    { model: path.join(dir, 'empty/model.json') },
    'BAD_MODEL',
    new RegExp(`model ${named('empty')}: expected .*found an empty file`),
    'empty model.json',
  );
  file('object/model.json', '{}');
  await refused(
    t,
    { model: path.join(dir, 'object/model.json') },
    'BAD_MODEL',
    new RegExp(`model ${named('object')}: expected .*found no "modelTopology"`),
    '{} as model.json',
  );
  file('no-manifest/model.json', JSON.stringify({ modelTopology: JSON.parse(json).modelTopology }));
  await refused(
    t,
    { model: path.join(dir, 'no-manifest/model.json') },
    'BAD_MODEL',
    /expected "weightsManifest": \[.*found no "weightsManifest"/,
    'no weightsManifest',
  );
  file('topology/model.json', JSON.stringify({ modelTopology: { class_name: 'Nonsense' }, weightsManifest: [] }));
  await refused(
    t,
    { model: path.join(dir, 'topology/model.json') },
    'BAD_MODEL',
    new RegExp(`tfjs cannot build the model ${named('topology')}`),
    'a topology tfjs cannot build',
  );
  // a graph model (tensorflowjs_converter's default for a SavedModel): tfjs said only "Improper config format"
  file('graph/model.json', JSON.stringify({ format: 'graph-model', modelTopology: { node: [] }, weightsManifest: [] }));
  await refused(
    t,
    { model: path.join(dir, 'graph/model.json') },
    'BAD_MODEL',
    new RegExp(`model ${named('graph')}: it is a TensorFlow.js graph model .* --output_format tfjs_layers_model`),
    'a graph model',
  );
  file('keras/model.h5', 'HDF');
  await refused(
    t,
    { model: path.join(dir, 'keras/model.h5') },
    'BAD_MODEL',
    /model\.h5 is neither .*; it looks like a Keras model: convert it \(tensorflowjs_converter --input_format keras/,
    'a Keras .h5',
  );
  file('short/model.json', json);
  file('short/weights.bin', weights.subarray(0, 40));
  await refused(
    t,
    { model: path.join(dir, 'short/model.json') },
    'BAD_MODEL',
    new RegExp(
      `model ${named('short')}: the weights \\(weights.bin\\) hold 40 bytes, but weightsManifest describes 2 ` +
        `weights of ${weights.length} bytes \\(truncated`,
    ),
    'weights.bin too short',
  );
  file('missing/model.json', json);
  await refused(
    t,
    { model: path.join(dir, 'missing/model.json') },
    'BAD_MODEL',
    /its weights file .*missing\/weights\.bin \(listed in weightsManifest\) cannot be read: no such file or directory \(ENOENT\)/,
    'weights.bin missing',
  );
});

t.test(
  "model modules and plugins: a syntax error, a factory that throws (with tandem's context, the cause kept), no " +
    'model returned',
  async t => {
    const syntax = file('syntax-model.mjs', 'export default (tf) => {\n  return tf.sequential({ layers: [,, };\n};\n');
    await refused(
      t,
      { model: syntax },
      'BAD_MODEL',
      /model module .*syntax-model\.mjs cannot be loaded: SyntaxError: .*\(line 2: /,
      'model module with a syntax error',
    );
    const throws = file('throws-model.mjs', 'export default () => { throw new RangeError("no GPU here"); };');
    const before = osThreads();
    const err = await train({ ...data, model: throws }).catch((e: Error) => e);
    t.match(err, {
      code: 'BAD_MODEL',
      message:
        /the model factory of .*throws-model\.mjs threw \(options \{"inputShape":\[6,6,1\],"classes":4,"seed":1\}\): RangeError: no GPU here/,
    });
    t.match(
      (err as Error).cause,
      { name: 'RangeError', message: 'no GPU here' },
      "the cause is the factory's own error",
    );
    t.equal(osThreads(), before, 'no thread started');
    const nothing = file('nothing-model.mjs', 'export default () => ({ layers: [] });');
    await refused(
      t,
      { model: nothing },
      'BAD_MODEL',
      /expected it to return a tf\.LayersModel .*found an object with keys layers/,
      'a factory returning no model',
    );
    const plugin = file(
      'syntax-plugin.mjs',
      'import { registerTransport } from "tandem";\nregisterTransport({ name: "x", });;\nexport const = 1;\n',
    );
    await refused(
      t,
      { model: 'mlp', plugins: [plugin] },
      'BAD_CONFIG',
      /plugin module .*syntax-plugin\.mjs cannot be loaded: SyntaxError: .*\(line 3: export const = 1;\)/,
      'a plugin with a syntax error',
    );
    const noDefault = file('no-default.mjs', 'export const model = 1;');
    await refused(
      t,
      { model: noDefault },
      'BAD_MODEL',
      /expected a default export function .*found no default export/,
      'a module without a default export',
    );
  },
);

t.test('data modules: a syntax error, null, 0 classes, a bad shape, a read that returns no label', async t => {
  const module = (name: string, body: string) => file(`${name}.mjs`, body);
  const cases: [string, string, RegExp][] = [
    [
      'syntax',
      'export default () => ({ size: 3,, });',
      /data module .*syntax\.mjs cannot be loaded: SyntaxError: .*\(line 1: /,
    ],
    [
      'null',
      'export default () => null;',
      /data module .*null\.mjs: its factory returned no dataset: expected a Dataset \{ size, sampleShape, classes, read.*found null/,
    ],
    [
      'zero-classes',
      'export default () => ({ size: 64, sampleShape: [6, 6, 1], classes: 0, read: () => 0 });',
      /zero-classes\.mjs: classes: expected an integer >= 1 .*found 0/,
    ],
    [
      'bad-shape',
      'export default () => ({ size: 64, sampleShape: [6, -6], classes: 2, read: () => 0 });',
      /bad-shape\.mjs: sampleShape: expected a non-empty list of positive integers.*found \[6,-6\]/,
    ],
    [
      'no-read',
      'export default () => ({ size: 64, sampleShape: [6, 6, 1], classes: 2 });',
      /no-read\.mjs: read: expected a function read\(index, out, offset\).*found nothing/,
    ],
    [
      'no-label',
      'export default () => ({ size: 64, sampleShape: [6, 6, 1], classes: 2, read() {} });',
      /no-label\.mjs: read\(0, out, offset\) returned nothing \(undefined\); expected the sample's label/,
    ],
    [
      'factory-throws',
      'export default () => { throw new Error("bucket not mounted"); };',
      /data module .*factory-throws\.mjs: its factory threw Error: bucket not mounted/,
    ],
  ];
  for (const [name, body, message] of cases)
    await refused(
      t,
      { model: 'mlp', data: module(name, body), classes: undefined, imageSize: undefined },
      'BAD_DATA',
      message,
      `data module: ${name}`,
    );
});

t.test('--config files and numbers on the command line', async t => {
  const cases: [string, string, RegExp][] = [
    ['null.json', 'null', /--config .*null\.json: expected a JSON object of train options .*found null/],
    ['empty.json', '', /--config .*empty\.json: expected a JSON object .*found an empty file/],
    ['list.json', '[1, 2]', /found an array/],
    ['broken.json', '{"model": "mlp",', /found invalid JSON/],
  ];
  for (const [name, body, message] of cases)
    t.throws(() => parseTrainArgs(['--config', file(name, body)]), { code: 'BAD_CONFIG', message }, name);
  t.throws(() => parseTrainArgs(['--config', path.join(dir, 'none.json')]), {
    code: 'BAD_CONFIG',
    message: /--config .*none\.json: cannot read it: no such file or directory/,
  });
  t.throws(() => parseTrainArgs(['--config', '/dev/zero']), {
    code: 'BAD_CONFIG',
    message: '--config /dev/zero: cannot read it: it is not a regular file (a device, FIFO or socket)',
  });
  const { config } = parseTrainArgs(['--devices', '-1', '--lr', '-.5']);
  t.same(config, { devices: -1, lr: -0.5 }, "a negative number is read as the flag's value, not as an option");
  await t.rejects(resolveConfig(config), {
    code: 'BAD_CONFIG',
    message: /config\.devices: must be an integer in \[1, 64\], got -1/,
  });
});

t.test('tandem profile validates its options as train does, before any thread', async t => {
  t.throws(() => parseTrainArgs(['--steps', '0'], 'profile'), {
    code: 'BAD_CONFIG',
    message: /tandem profile --steps \(measured steps\) must be an integer >= 1, got 0/,
  });
  const before = osThreads();
  const base = {
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [6, 6, 1],
    datasetSize: 64,
    batch: 8,
    backend: 'cpu',
  } as const;
  await t.rejects(profileModel({ ...base, imageSize: [6, 6, 1] }, train, { steps: 0 }), {
    code: 'BAD_CONFIG',
    message: /profile\.steps: must be an integer in \[1, 10000\], got 0/,
  });
  await t.rejects(profileModel({ ...base, imageSize: [6, 6, 1] }, train, { reps: 1.5 }), {
    code: 'BAD_CONFIG',
    message: /profile\.reps/,
  });
  await t.rejects(profileModel({ ...base, imageSize: [6, 6, 1], timeShare: 2 }, train), {
    code: 'BAD_CONFIG',
    message: /config\.timeShare/,
  });
  t.equal(osThreads(), before, 'no thread started');
});
