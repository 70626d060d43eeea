// `tandem launch --gpus 2 --backend webgpu` (two real processes, each its own Dawn device; llvmpipe where this machine
// has no GPU) against one process with 2 cpu devices: alexnet-mini and resnet-mini (BatchNormalization) within 1e-5,
// and each GPU process reports the adapter it ran on. Part of `npm run test:webgpu` (slow on software Vulkan); skips
// saying why when webgpu cannot run here, unless TANDEM_REQUIRE_WEBGPU is set. The launch across processes without
// webgpu (bits, pinning, faults, resume) is test/gpus-launch.test.ts.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { exitedZero, killAllTandems, summaryOf, tandem } from './fixtures/tandem-lines.js';
import { findGpus } from '../src/world/gpu-inventory.js';
import { engineNames } from '../src/engine/engine-registry.js';
import { withFlags } from './fixtures/flag-args.js';
import { smallRunArgs } from './fixtures/small-run.js';

// --verbose: every GPU process prints its steps
const TRAIN = [...smallRunArgs({ seed: 3, strategy: 'sequential' }), '--json', '--verbose'];

t.teardown(killAllTandems);

const dir = mkdtempSync(path.join(tmpdir(), 'tandem-gpus-webgpu-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const weightBits = (out: string) => readFileSync(path.join(out, 'weights.bin'));

if (glooAddonOrSkip()) {
  // Two GPU processes against one process with 2 cpu devices: alexnet-mini, and resnet-mini (BatchNormalization; on
  // webgpu each device normalises with its own batch, so both sides run --batch-norm local).
  const models = [
    { name: 'alexnet-mini', flags: ['--model', 'alexnet-mini', '--image-size', '12x12x3', '--strategy', 'per-layer'] },
    { name: 'resnet-mini', flags: ['--model', 'resnet-mini', '--image-size', '8x8x3', '--batch-norm', 'local'] },
  ];
  for (const model of models) {
    t.test(
      `--backend webgpu --gpus 2, ${model.name}: the weights of one process with 2 cpu devices within 1e-5`,
      async t => {
        if (!engineNames().includes('webgpu')) {
          t.comment('skipped: no webgpu engine registered (engines: ' + engineNames().join(', ') + ')');
          return;
        }
        const flags = withFlags(TRAIN, [...model.flags, '--classes', '4', '--steps', '2', '--dataset-size', '32']);
        const out = (run: string) => path.join(dir, `${model.name}-${run}`);
        const webgpu = tandem(['launch', '--gpus', '2', '--backend', 'webgpu', ...flags, '--out', out('webgpu')]);
        const cpu = tandem(['train', '--devices', '2', '--backend', 'cpu', ...flags, '--out', out('cpu')]);
        const [end, cpuEnd] = await Promise.all([webgpu.ended, cpu.ended]);
        const said = webgpu.lines.concat(webgpu.stderr).join('\n');
        if (
          end.code !== 0 &&
          /BACKEND_UNAVAILABLE|no (WebGPU )?adapter/i.test(said) &&
          !process.env.TANDEM_REQUIRE_WEBGPU
        ) {
          t.comment(`skipped: webgpu cannot run here: ${said.split('\n').slice(-3).join(' | ')}`);
          return;
        }
        exitedZero(t, webgpu, end.code, 'launch --gpus 2 --backend webgpu');
        const inventory = findGpus();
        for (const k of [0, 1]) {
          const devices = summaryOf(webgpu.lines, `[gpu ${k}] `).engineDevices;
          t.equal(
            devices?.length,
            1,
            `GPU process ${k} reports the adapter its one device ran on: ${JSON.stringify(devices?.[0])}`,
          );
          t.equal(
            devices?.[0].software,
            inventory.kind === 'software',
            `GPU process ${k}: a software adapter iff this machine has no GPU`,
          );
        }
        exitedZero(t, cpu, cpuEnd.code, 'one process --devices 2 --backend cpu');
        const [a, b] = [out('webgpu'), out('cpu')].map(run => new Float32Array(new Uint8Array(weightBits(run)).buffer));
        t.equal(a.length, b.length, 'the same weights');
        const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
        t.ok(worst <= 1e-5, `largest |webgpu - cpu| = ${worst.toExponential(2)} ≤ 1e-5`);
      },
    );
  }
}
