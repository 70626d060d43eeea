// Two hosts that build different models (a model path is free to differ between machines, the model is not): both
// used to finish with exit 0 and different weights (their replica checksums differed, nothing said so). Each host now
// compares the model it built (its tensors and parameter count, and each layer's settings: a dropout rate changes no
// tensor) with host 0's before step 1, and both fail with BAD_CONFIG naming the hosts and what differs. Two real
// processes on 127.0.0.1.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { killAllTandems, tandem } from './fixtures/tandem-lines.js';
import { freePort } from '../src/world/launch.js';

t.teardown(killAllTandems);
const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-model-differs-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const config = path.join(dir, 'train.json');
const SMALL = { model: 'mlp', data: 'synthetic-images', imageSize: [8, 8, 1], classes: 4, batch: 8, steps: 2 };
writeFileSync(config, JSON.stringify({ ...SMALL, datasetSize: 64, devices: 1 }));

/** The environment without any launcher's variables, with the job's secret. */
function env(): Record<string, string> {
  const launcher = /^(TANDEM_|OMPI_|SLURM_|JOB_COMPLETION_INDEX)|^(RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_)/;
  const kept = Object.entries(process.env).filter(([k, v]) => !launcher.test(k) && v !== undefined);
  return {
    ...(Object.fromEntries(kept) as Record<string, string>),
    TANDEM_JOB_SECRET: 'a-test-secret-0123456789abcdef',
  };
}

/** Hosts 0 and 1 of a fresh world, each given the config and its own arguments: how each ended, and its stderr. */
async function twoHosts(extra: string[][]): Promise<{ code: number | null; stderr: string }[]> {
  const port = await freePort();
  const world = ['--hosts', '2', '--rendezvous', `127.0.0.1:${port}`];
  const runs = extra.map((more, rank) =>
    tandem(['train', '--config', config, ...world, '--host-rank', String(rank), ...more], undefined, (c, a) =>
      spawn(c, a, { stdio: ['ignore', 'pipe', 'pipe'], env: env() }),
    ),
  );
  const ended = await Promise.all(runs.map(r => r.ended));
  return runs.map((run, rank) => ({ code: ended[rank].code, stderr: run.stderr.join('\n') }));
}

t.test('host 1 on another model than host 0: both fail naming the hosts and the models', async t => {
  for (const [rank, { code, stderr }] of (await twoHosts([[], ['--model', 'convnet-gap']])).entries()) {
    t.equal(code, 1, `host ${rank} failed: ${stderr}`);
    t.match(
      stderr,
      /host \d and host \d built different models — model parameters: \d+ in \d+ tensors on host \d, \d+ in \d+ tensors on host \d/,
    );
  }
});

t.test(
  'host 1 on the same tensors with another dropout rate: both fail naming the layer and both settings',
  async t => {
    const model = (rate: number) => {
      const file = path.join(dir, `dropout-${rate}.mjs`);
      writeFileSync(
        file,
        'export default (tf, { inputShape, classes }) => tf.sequential({ layers: [\n' +
          '  tf.layers.flatten({ inputShape }),\n' +
          "  tf.layers.dense({ units: 16, activation: 'relu' }),\n" +
          `  tf.layers.dropout({ rate: ${rate} }),\n` +
          '  tf.layers.dense({ units: classes }),\n' +
          '] });\n',
      );
      return file;
    };
    const hosts = await twoHosts([model(0.1), model(0.5)].map(file => ['--model', file]));
    for (const [rank, { code, stderr }] of hosts.entries()) {
      t.equal(code, 1, `host ${rank} failed: ${stderr}`);
      t.match(
        stderr,
        /built different models — model layer 2: Dropout \{"rate":0\.\d[^}]*\} on host \d, Dropout \{"rate":0\.\d/,
      );
      t.notMatch(stderr, /model tensors|model parameters|model layer [013]/, 'only the layer that differs is named');
    }
  },
);
