// Hosts that do not meet, in real `tandem train` processes: half of a launcher's pair of variables (torchrun's
// WORLD_SIZE and rendezvous without RANK made every process host 0: one failed to listen with EADDRINUSE, the other
// waited for hosts that thought they were host 0 too), RANK not below WORLD_SIZE (refused as a bad --host-rank the
// user never gave), each refused at once naming the variables; and a host that never starts, named by host 0 after
// the setup wait with what to check (not the store's bare key name).
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { killAllTandems, tandem } from './fixtures/tandem-lines.js';
import { freePort } from '../src/world/launch.js';

t.teardown(killAllTandems);
const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-env-halves-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const config = path.join(dir, 'train.json');
const SMALL = { model: 'mlp', data: 'synthetic-images', imageSize: [8, 8, 1], classes: 4, batch: 8, steps: 2 };
writeFileSync(config, JSON.stringify({ ...SMALL, datasetSize: 64, devices: 1 }));

/** The environment without any launcher's variables, plus `vars`. */
function envWith(vars: Record<string, string>): Record<string, string> {
  const launcher = /^(TANDEM_|OMPI_|SLURM_|JOB_COMPLETION_INDEX)|^(RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_)/;
  const kept = Object.entries(process.env).filter(([k, v]) => !launcher.test(k) && v !== undefined);
  return { ...(Object.fromEntries(kept) as Record<string, string>), ...vars };
}

async function refusal(vars: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const run = tandem(['train', '--config', config], undefined, (command, args) =>
    spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: envWith(vars) }),
  );
  const ended = await run.ended;
  return { code: ended.code, stderr: run.stderr.join('\n') };
}

t.test('WORLD_SIZE and the rendezvous without RANK: refused naming RANK', async t => {
  const port = await freePort();
  const secret = 'a-test-secret-of-enough-length-0123456789';
  const vars = { WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port), TANDEM_JOB_SECRET: secret };
  const { code, stderr } = await refusal(vars);
  t.equal(code, 1, stderr);
  t.match(stderr, /WORLD_SIZE is set but RANK is not.*--host-rank/);
});

t.test('RANK not below WORLD_SIZE: refused naming both variables', async t => {
  const { code, stderr } = await refusal({ RANK: '2', WORLD_SIZE: '2' });
  t.equal(code, 1, stderr);
  t.match(stderr, /RANK is 2, not below WORLD_SIZE 2/);
});

t.test('host 0 alone, host 1 never started: STALLED naming host 1 and what to check', async t => {
  const port = await freePort();
  const secret = 'a-test-secret-of-enough-length-0123456789';
  const vars = { TANDEM_JOB_SECRET: secret };
  const run = tandem(
    [
      'train',
      '--config',
      config,
      '--hosts',
      '2',
      '--host-rank',
      '0',
      '--rendezvous',
      `127.0.0.1:${port}`,
      '--stall-timeout-ms',
      '1000',
    ],
    undefined,
    (command, args) => spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: envWith(vars) }),
  );
  const ended = await run.ended;
  const stderr = run.stderr.join('\n');
  t.equal(ended.code, 1, stderr);
  t.match(stderr, /host 1 did not join the rendezvous in time \(host 0 waited;.*--host-rank.*setup watchdog/);
});
