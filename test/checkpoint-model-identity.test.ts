// A checkpoint knows a model.json by its layers, not by where the file lies: a run resumed with a copy of the
// model.json elsewhere (the run moved to another folder or machine) continues exactly, and one resumed with a
// model.json whose layers changed (another dropout rate: the same variables) is refused, naming what differs.
import t from 'tap';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { runTandem } from './fixtures/cli-process.js';
import { smallRunArgs } from './fixtures/small-run.js';

/** A small model.json (with its weights.bin) in `dir`: flatten, dense, dropout `rate`, softmax. */
async function saveModel(dir: string, rate: number): Promise<string> {
  const model = tf.sequential({
    layers: [
      tf.layers.flatten({ inputShape: [8, 8, 1] }),
      tf.layers.dense({ units: 8, activation: 'relu', kernelInitializer: tf.initializers.glorotUniform({ seed: 1 }) }),
      tf.layers.dropout({ rate, seed: 2 }),
      tf.layers.dense({
        units: 4,
        activation: 'softmax',
        kernelInitializer: tf.initializers.glorotUniform({ seed: 3 }),
      }),
    ],
  });
  await mkdir(dir, { recursive: true });
  await model.save(
    tf.io.withSaveHandler(async a => {
      const manifest = [{ paths: ['weights.bin'], weights: a.weightSpecs }];
      await writeFile(
        path.join(dir, 'model.json'),
        JSON.stringify({ modelTopology: a.modelTopology, weightsManifest: manifest }),
      );
      await writeFile(path.join(dir, 'weights.bin'), Buffer.from(a.weightData as ArrayBuffer));
      return { modelArtifactsInfo: { dateSaved: new Date(), modelTopologyType: 'JSON' } };
    }),
  );
  model.dispose();
  return path.join(dir, 'model.json');
}

const flags = (model: string, steps: number, out: string) => [
  'train',
  ...smallRunArgs({ model, steps }),
  ...['--devices', '2', '--loss', 'categorical', '--checkpoint-every', '3', '--out', out, '--quiet'],
];

t.test('a model.json copied elsewhere resumes exactly; one with other layers is refused', async t => {
  await tf.setBackend('cpu');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tandem-ckpt-model-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const model = await saveModel(path.join(dir, 'here'), 0.3);
  const [whole, part] = [path.join(dir, 'whole'), path.join(dir, 'part')];
  const ok = async (args: string[]) => {
    const run = await runTandem(args);
    t.equal(run.code, 0, run.stderr);
  };
  await ok(flags(model, 6, whole));
  await ok(flags(model, 3, part));

  await cp(path.join(dir, 'here'), path.join(dir, 'there'), { recursive: true });
  const copy = path.join(dir, 'there', 'model.json');
  await ok([...flags(copy, 6, part), '--resume', part]);
  const same = (await readFile(path.join(whole, 'weights.bin'))).equals(await readFile(path.join(part, 'weights.bin')));
  t.ok(same, 'resumed with the copy: the weights of the run uninterrupted, bit for bit');

  const json = await readFile(copy, 'utf8');
  t.match(json, '"rate":0.3');
  await writeFile(copy, json.replace('"rate":0.3', '"rate":0.5')); // the same variables, other layers
  const refused = await runTandem([...flags(copy, 9, part), '--resume', part]);
  t.not(refused.code, 0, 'refused');
  t.match(
    refused.stderr,
    /was written by a run with other settings: model\.layersOfModelJson "sha256:[0-9a-f]{16}" in the checkpoint, "sha256:[0-9a-f]{16}" in this run/,
  );
});
