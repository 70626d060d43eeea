// docs/guide/clusters.md's examples, run locally: for the Kubernetes Indexed Job, Slurm, mpirun and PyTorchJob, the
// command and the environment each gives its processes (read from the page itself), two real processes on loopback,
// the config file replaced by a small run and the rendezvous host by 127.0.0.1: both form one world of 2 hosts and
// finish; host 0 writes the parameters one process with 2 devices ends with. A fifth world sets torchrun's four
// variables only (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). What the scheduler would set (the rank variables) the
// test sets as it would.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandem } from './fixtures/tandem-lines.js';
import { freePort } from '../src/world/launch.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const page = readFileSync(path.join(root, 'docs/guide/clusters.md'), 'utf8');
const blocks = [...page.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map(m => ({ lang: m[1], text: m[2] }));
const SECRET = 'a-test-secret-of-enough-length-0123456789';
t.teardown(killAllTandems);

interface Example {
  name: string;
  /** The command after the launcher, as the page gives it. */
  command: string[];
  /** Host rank r's environment as the page and its scheduler give it (rendezvous host left as written). */
  env: (rank: number, port: number) => Record<string, string>;
}

/** `npx tandem ARGS` → ARGS with the config replaced by `config` and `--out` by `out` (host 0 only). */
function localArgs(command: string[], config: string, out: string, rank: number): string[] {
  const args = command.slice(command.indexOf('tandem') + 1);
  const outAt = args.indexOf('--out');
  const withOut = rank === 0 ? args.with(outAt + 1, out) : args.filter((_, i) => i !== outAt && i !== outAt + 1);
  return withOut.with(withOut.indexOf('--config') + 1, config);
}

function kubernetes(): Example {
  const yaml = blocks.find(b => b.lang === 'yaml')!.text;
  const command = JSON.parse(/command: (\[.*\])/.exec(yaml)![1]) as string[];
  const values = Object.fromEntries([...yaml.matchAll(/- name: (\w+)\n\s+value: "([^"]*)"/g)].map(m => [m[1], m[2]]));
  t.ok(
    /name: TANDEM_JOB_SECRET\n\s+valueFrom:\n\s+secretKeyRef/.test(yaml),
    'the manifest gives the secret from a Secret',
  );
  return {
    name: 'Kubernetes Indexed Job',
    command,
    env: (rank, port) => ({
      ...values,
      TANDEM_RENDEZVOUS: values.TANDEM_RENDEZVOUS.replace(/^[^:]+:\d+$/, `127.0.0.1:${port}`),
      TANDEM_JOB_SECRET: SECRET,
      JOB_COMPLETION_INDEX: String(rank),
    }),
  };
}

function slurm(): Example {
  const script = blocks.find(b => b.text.includes('#SBATCH'))!.text;
  const nodes = Number(/--nodes=(\d+)/.exec(script)![1]);
  t.ok(/export TANDEM_RENDEZVOUS=.*:29500"/.test(script) && /export TANDEM_JOB_SECRET=/.test(script));
  return {
    name: 'Slurm',
    command: /^srun (.*)$/m.exec(script)![1].split(' '),
    env: (rank, port) => ({
      TANDEM_RENDEZVOUS: `127.0.0.1:${port}`,
      TANDEM_JOB_SECRET: SECRET,
      SLURM_PROCID: String(rank),
      SLURM_NTASKS: String(nodes),
    }),
  };
}

function mpirun(): Example {
  const line = /^mpirun (.*)$/m.exec(blocks.find(b => b.text.includes('mpirun'))!.text)![1].split(' ');
  const set: Record<string, string> = {};
  let i = 0;
  for (; line[i].startsWith('-'); i += 2) {
    const [key, value] = line[i + 1].split('=');
    if (line[i] === '-x' && value !== undefined) set[key] = value;
  }
  t.ok(line.includes('TANDEM_JOB_SECRET'), 'mpirun passes the secret on');
  const np = line[line.indexOf('-np') + 1];
  return {
    name: 'mpirun',
    command: line.slice(i),
    env: (rank, port) => ({
      TANDEM_RENDEZVOUS: set.TANDEM_RENDEZVOUS.replace(/^[^:]+/, '127.0.0.1').replace(/\d+$/, String(port)),
      TANDEM_JOB_SECRET: SECRET,
      OMPI_COMM_WORLD_RANK: String(rank),
      OMPI_COMM_WORLD_SIZE: np,
    }),
  };
}

function pytorchJob(k8s: Example): Example {
  return {
    name: 'PyTorchJob',
    command: k8s.command,
    env: (rank, port) => ({ ...torchrunOnly(k8s).env(rank, port), LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '1' }),
  };
}

/** torchrun's four variables and nothing else of a launcher's (the secret apart: every world of hosts needs one). */
function torchrunOnly(k8s: Example): Example {
  return {
    name: 'torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT only)',
    command: k8s.command,
    env: (rank, port) => ({
      RANK: String(rank),
      WORLD_SIZE: '2',
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(port),
      TANDEM_JOB_SECRET: SECRET,
    }),
  };
}

/** This process's environment without any launcher's variables. */
function cleanEnv(): Record<string, string> {
  const launcher = /^(TANDEM_|OMPI_|SLURM_)|^(RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_RANK|LOCAL_WORLD_SIZE)$/;
  return Object.fromEntries(
    Object.entries(process.env).filter(([k, v]) => !launcher.test(k) && v !== undefined),
  ) as Record<string, string>;
}

const SMALL = { model: 'mlp', data: 'synthetic-images', imageSize: [8, 8, 1], classes: 4, batch: 8, steps: 2 };

/** The parameters one process with 2 devices ends with (weights.bin, as host 0 writes it). */
async function oneProcessWeights(t: Test): Promise<Float32Array> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-clusters-one-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = path.join(dir, 'train.json');
  writeFileSync(config, JSON.stringify({ ...SMALL, datasetSize: 64, devices: 2 }));
  const run = tandem(['train', '--config', config, '--out', path.join(dir, 'out')], undefined, (command, args) =>
    spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv() }),
  );
  const ended = await run.ended;
  t.equal(ended.code, 0, `one process with 2 devices finished: ${run.stderr.join('\n')}`);
  return weightsIn(path.join(dir, 'out'));
}

const weightsIn = (out: string) => new Float32Array(new Uint8Array(readFileSync(path.join(out, 'weights.bin'))).buffer);

if (glooAddonOrSkip()) {
  const k8s = kubernetes();
  let reference: Promise<Float32Array> | undefined;
  for (const example of [k8s, slurm(), mpirun(), pytorchJob(k8s), torchrunOnly(k8s)]) {
    t.test(`${example.name}: the page's command and environment form one world of 2 hosts`, async t => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-clusters-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const config = path.join(dir, 'train.json');
      writeFileSync(config, JSON.stringify({ ...SMALL, datasetSize: 64, devices: 1 }));
      const port = await freePort();
      const out = path.join(dir, 'out');
      const hosts = [0, 1].map(rank =>
        tandem(localArgs(example.command, config, out, rank), undefined, (command, args) =>
          spawn(command, args, {
            stdio: ['ignore', 'pipe', 'pipe'],
            env: { ...cleanEnv(), ...example.env(rank, port) },
          }),
        ),
      );
      const ended = await Promise.all(hosts.map(h => h.ended));
      ended.forEach((e, r) => t.equal(e.code, 0, `host ${r} finished: ${hosts[r].stderr.join('\n')}`));
      const done = hosts[0].lines.find(l => l.startsWith('done:'));
      t.match(done, /^done: 2 steps on 2 device\(s\)/, 'host 0 trained in a world of 2 (host 1 is quiet)');
      t.ok(existsSync(path.join(out, 'weights.bin')), 'host 0 wrote the model');
      reference ??= oneProcessWeights(t);
      const expected = await reference;
      const got = weightsIn(out);
      t.equal(got.length, expected.length, 'as many parameters as one process with 2 devices');
      const worst = got.reduce((m, v, i) => Math.max(m, Math.abs(v - expected[i])), 0);
      t.ok(worst <= 1e-6, `the parameters of one process with 2 devices (largest difference ${worst})`);
    });
  }
}
