/**
 * `npm run bench -- models`: samples/s of the BatchNormalization models —
 * resnet-mini (ResNet-style, functional) and mobilenet-mini (depthwise-
 * separable) — on 1 and 2 devices, native and wasm, and on 2 devices what
 * synchronised BatchNormalization (the default: global-batch statistics, a
 * collective in forward and backward) costs beside local statistics.
 * Steady-state step times (after the warm-up steps), one run each.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { train, type BackendName, type TrainConfig } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

export interface ModelsBenchOptions { steps: number; perDeviceBatch: number; out: string }

const MODELS = ['resnet-mini', 'mobilenet-mini'] as const;

export async function runModelsBench(opts: ModelsBenchOptions): Promise<void> {
  const backends: BackendName[] = loadNativeAddon().loaded ? ['native', 'wasm'] : ['wasm'];
  console.log(`models bench: ${MODELS.join(', ')} on 32x32x3 synthetic images, ${opts.perDeviceBatch} samples per device per step, ` +
    `${opts.steps} steps, sgd; backends ${backends.join(', ')}; ${os.availableParallelism()} cores. (No PyTorch column yet.)`);
  const rows: Record<string, unknown>[] = [];
  console.log('| model | backend | 1 device samples/s | 2 devices (sync BN) samples/s | 2 devices (local BN) samples/s | sync / local step time |');
  console.log('|---|---|---:|---:|---:|---:|');
  for (const model of MODELS) {
    for (const backend of backends) {
      const run = async (devices: number, batchNorm: 'sync' | 'local') => {
        const cfg: TrainConfig = { model, data: 'synthetic-images', imageSize: [32, 32, 3], datasetSize: 4096, classes: 10, devices, batchNorm,
          batch: devices * opts.perDeviceBatch, steps: opts.steps, backend, optimizer: 'sgd', lr: 0.01 };
        const s = await train(cfg);
        return { samplesPerSecond: cfg.batch! / (s.steadyStepMs / 1000), stepMs: s.steadyStepMs };
      };
      const one = await run(1, 'sync');
      const sync = await run(2, 'sync');
      const local = await run(2, 'local');
      const ratio = sync.stepMs / local.stepMs;
      console.log(`| ${model} | ${backend} | ${one.samplesPerSecond.toFixed(0)} | ${sync.samplesPerSecond.toFixed(0)} | ${local.samplesPerSecond.toFixed(0)} | ${ratio.toFixed(2)} |`);
      rows.push({ model, backend, oneDevice: one, twoDevicesSync: sync, twoDevicesLocal: local, syncOverLocal: ratio });
    }
  }
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(`${opts.out}/models.json`, JSON.stringify({ bench: 'models', date: new Date().toISOString(), options: opts, rows }, null, 2));
  console.log(`\nJSON: ${opts.out}/models.json`);
}
