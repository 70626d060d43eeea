// TensorBoard event files of a run on 1 device and of a run on 2 hosts (loopback, `tandem launch --hosts 2`), read back
// by the independent decoder (test/fixtures/tfevents-decoder.ts): every step's loss and accuracy equal the run's own
// summary.json (2 hosts: host 0's, the world's), each device of the world has its compute and exchange time every step,
// and only host 0 writes.
import t, { type Test } from 'tap';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runTandem } from './fixtures/cli-process.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { smallRunArgs } from './fixtures/small-run.js';
import { decodeDir, f32, missingDecoder, valuesOf, type Decoded } from './fixtures/tfevents-decoder.js';

interface Summary {
  history: { step: number; loss: number; accuracy: number }[];
  parameters: number;
}

const STEPS = 6;

/** A run of `launch` (or `train`) with --tensorboard DIR/tb and --out DIR/out: its decoded events and summary. */
async function boardOf(t: Test, command: string[]): Promise<{ decoded: Decoded; summary: Summary; board: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tb-hosts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const board = path.join(dir, 'tb'),
    out = path.join(dir, 'out');
  const run = await runTandem([...command, '--out', out, '--tensorboard', board, '--quiet']);
  if (run.code !== 0) throw new Error(`tandem ${command.join(' ')} exited ${run.code}: ${run.stderr}`);
  const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as Summary;
  return { decoded: decodeDir(path.join(board, 'train')).decoded, summary, board };
}

function sameSteps(t: Test, decoded: Decoded, summary: Summary): void {
  t.equal(summary.history.length, STEPS);
  t.same(
    valuesOf(decoded, 'batch_loss'),
    summary.history.map(h => [h.step, f32(h.loss)]),
    "batch_loss: the run's loss of every step",
  );
  t.same(
    valuesOf(decoded, 'batch_acc'),
    summary.history.map(h => [h.step, f32(h.accuracy)]),
    "batch_acc: the run's accuracy of every step",
  );
}

const missing = missingDecoder();
if (missing && process.env.TANDEM_REQUIRE_TENSORBOARD === '1') t.fail(`TANDEM_REQUIRE_TENSORBOARD=1 but ${missing}`);
else if (missing) t.plan(0, `skipped: ${missing}`);
else {
  t.test('one device: its steps and its compute time, no other device', async t => {
    const args = [...smallRunArgs({ seed: 5, steps: STEPS }), '--devices', '1', '--backend', 'cpu'];
    const { decoded, summary } = await boardOf(t, ['train', ...args]);
    sameSteps(t, decoded, summary);
    t.equal(valuesOf(decoded, 'compute_ms/device_0').length, STEPS, 'compute_ms/device_0 every step');
    t.same(
      decoded.scalars.filter(([tag]) => /device_[1-9]/.test(tag)),
      [],
      'no other device',
    );
  });

  t.test("two hosts on loopback: host 0 writes the world's steps, every device of every host", async t => {
    if (!glooAddonOrSkip()) return;
    const args = [...smallRunArgs({ seed: 5, steps: STEPS }), '--devices', '1', '--backend', 'cpu'];
    const { decoded, summary, board } = await boardOf(t, ['launch', '--hosts', '2', ...args]);
    sameSteps(t, decoded, summary);
    for (const tag of ['compute_ms/device_0', 'compute_ms/device_1', 'exchange_ms/device_0', 'exchange_ms/device_1']) {
      const got = valuesOf(decoded, tag);
      t.same(
        got.map(([step]) => step),
        summary.history.map(h => h.step),
        `${tag} every step`,
      );
      t.ok(
        got.every(([, v]) => Number.isFinite(v) && v > 0),
        `${tag} positive`,
      );
    }
    for (const device of [0, 1])
      t.same(
        valuesOf(decoded, `exchange_bytes/device_${device}`).map(([, v]) => v),
        summary.history.map(() => 4 * summary.parameters),
        `exchange_bytes/device_${device}: host ${device}'s gradient, 4 bytes a parameter, every step`,
      );
    t.same(readdirSync(path.join(board, 'train')).length, 1, 'one event file: host 1 writes none');
    t.notOk(existsSync(path.join(board, 'val')), 'no val directory for a train run');
  });
}
