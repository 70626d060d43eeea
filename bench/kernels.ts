/**
 * `npm run bench -- kernels`: what the native backend buys, kernel by kernel and
 * per training step, beside stock tfjs (cpu backend), tandem's wasm kernels and
 * PyTorch (when `python3 -c "import torch"` works here).
 *  1. Every kernel of an alexnet-mini training step at its real shape (batch 32):
 *     native, cpu (tfjs's, with tandem's Conv2DBackpropFilter), wasm: median ms.
 *     Then the kernels of depthwise convolution, BatchNormalization (training) and an embedding.
 *  2. One training step of alexnet-mini (batch 32, one device, steady state) per
 *     tandem backend, and PyTorch's single-thread step of the same model, in this run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import * as tf from '@tensorflow/tfjs';
import { train, type TrainConfig, type BackendName } from '../src/index.js';
import { startBackend } from '../src/engine/backend.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { batchNormTraining } from '../src/model/batch-norm-training.js';
import { findTorchPython, runTorchReference } from './torch-reference.js';

export interface KernelBenchOptions {
  steps: number;
  batch: number;
  out: string;
}

type KernelBackend = 'native' | 'cpu' | 'wasm';
interface KernelCase {
  name: string;
  inputs: number[][];
  run: (...xs: tf.Tensor[]) => tf.Tensor;
}

/** The kernels of one alexnet-mini training step at batch b (32x32x3 input, 10 classes). */
function alexnetMiniKernels(b: number): KernelCase[] {
  const cases: KernelCase[] = [];
  const convs = [
    [32, 3, 32],
    [16, 32, 64],
    [8, 64, 64],
  ]; // [size, in channels, out channels]
  convs.forEach(([s, c, oc], i) => {
    const x = [b, s, s, c],
      w = [3, 3, c, oc],
      y = [b, s, s, oc];
    cases.push({
      name: `conv${i + 1} forward ${x.join('x')} * 3x3x${c}x${oc}`,
      inputs: [x, w],
      run: (a, k) => tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same'),
    });
    cases.push({
      name: `conv${i + 1} fused forward + bias + relu (one kernel)`,
      inputs: [x, w, [oc]],
      run: (a, k, bias) =>
        tf.fused.conv2d({
          x: a as tf.Tensor4D,
          filter: k as tf.Tensor4D,
          strides: 1,
          pad: 'same',
          bias,
          activation: 'relu',
        }),
    });
    if (i > 0)
      cases.push({
        name: `conv${i + 1} backprop input`,
        inputs: [y, w],
        run: (g, k) =>
          tf
            .engine()
            .runKernel(
              'Conv2DBackpropInput',
              { dy: g, filter: k },
              { strides: 1, pad: 'same', dataFormat: 'NHWC', inputShape: x },
            ) as tf.Tensor,
      });
    cases.push({
      name: `conv${i + 1} backprop filter`,
      inputs: [x, y],
      run: (a, g) =>
        tf
          .engine()
          .runKernel(
            'Conv2DBackpropFilter',
            { x: a, dy: g },
            { strides: 1, pad: 'same', dataFormat: 'NHWC', filterShape: w },
          ) as tf.Tensor,
    });
    cases.push({
      name: `maxpool${i + 1} forward ${y.join('x')}`,
      inputs: [y],
      run: a => tf.maxPool(a as tf.Tensor4D, 2, 2, 'valid'),
    });
    cases.push({
      name: `maxpool${i + 1} gradient`,
      inputs: [y, [b, s / 2, s / 2, oc]],
      run: (a, g) => {
        const out = tf.maxPool(a as tf.Tensor4D, 2, 2, 'valid');
        return tf
          .engine()
          .runKernel(
            'MaxPoolGrad',
            { dy: g, input: a, output: out },
            { filterSize: 2, strides: 2, pad: 'valid' },
          ) as tf.Tensor;
      },
    });
    cases.push({ name: `relu${i + 1} ${y.join('x')}`, inputs: [y], run: a => tf.relu(a) });
  });
  cases.push({
    name: `fc1 forward ${b}x1024 @ 1024x512`,
    inputs: [
      [b, 1024],
      [1024, 512],
    ],
    run: (a, w) => tf.matMul(a, w),
  });
  cases.push({
    name: 'fc1 dW = x^T @ dy',
    inputs: [
      [b, 1024],
      [b, 512],
    ],
    run: (a, g) => tf.matMul(a, g, true, false),
  });
  cases.push({
    name: 'fc1 dx = dy @ W^T',
    inputs: [
      [b, 512],
      [1024, 512],
    ],
    run: (g, w) => tf.matMul(g, w, false, true),
  });
  cases.push({ name: `bias add ${b}x32x32x32 + 32`, inputs: [[b, 32, 32, 32], [32]], run: (a, v) => tf.add(a, v) });
  cases.push({
    name: `bias gradient sum ${b}x32x32x32 -> 32`,
    inputs: [[b, 32, 32, 32]],
    run: a => tf.sum(a, [0, 1, 2]),
  });
  return cases;
}

/**
 * The kernels of the layers issue 13 asked about: depthwise convolution, BatchNormalization in training, an embedding.
 */
function otherLayerKernels(b: number): KernelCase[] {
  const x = [b, 16, 16, 32],
    w = [3, 3, 32, 1];
  const ids = (a: tf.Tensor) => tf.cast(tf.mul(tf.abs(a), 999), 'int32'); // 0..999 from the random inputs
  const bnStock = (a: tf.Tensor) => {
    const { mean, variance } = tf.moments(a, [0, 1, 2]);
    return tf.batchNorm(a as tf.Tensor4D, mean, variance, tf.zeros([32]), tf.ones([32]), 1e-3);
  };
  const bnTandem = (a: tf.Tensor) =>
    batchNormTraining(tf, a, tf.ones([32]), tf.zeros([32]), { axis: -1, epsilon: 1e-3 }).y;
  return [
    {
      name: `depthwise conv forward ${x.join('x')} * 3x3x32x1`,
      inputs: [x, w],
      run: (a, k) => tf.depthwiseConv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same'),
    },
    {
      name: 'depthwise conv backprop input',
      inputs: [x, w],
      run: (g, k) =>
        tf
          .engine()
          .runKernel(
            'DepthwiseConv2dNativeBackpropInput',
            { dy: g, filter: k },
            { strides: 1, pad: 'same', dilations: 1, inputShape: x },
          ) as tf.Tensor,
    },
    {
      name: 'depthwise conv backprop filter',
      inputs: [x, x],
      run: (a, g) =>
        tf
          .engine()
          .runKernel(
            'DepthwiseConv2dNativeBackpropFilter',
            { x: a, dy: g },
            { strides: 1, pad: 'same', dilations: 1, filterShape: w },
          ) as tf.Tensor,
    },
    {
      name: `batch norm training forward ${x.join('x')}, tfjs's ops (moments + batchNorm)`,
      inputs: [x],
      run: a => bnStock(a),
    },
    {
      name: "batch norm training forward + gradient (dx from dy), tfjs's ops",
      inputs: [x, x],
      run: (a, g) => tf.grad(bnStock)(a, g),
    },
    { name: "batch norm training forward, tandem's kernel (what a run uses)", inputs: [x], run: a => bnTandem(a) },
    {
      name: "batch norm training forward + gradient (dx from dy), tandem's kernel",
      inputs: [x, x],
      run: (a, g) => tf.grad(bnTandem)(a, g),
    },
    {
      name: `embedding gather ${b * 16} ids from 1000x64`,
      inputs: [[b * 16], [1000, 64]],
      run: (a, table) => tf.gather(table, ids(a)),
    },
    {
      name: 'embedding gradient (UnsortedSegmentSum) into 1000x64',
      inputs: [[b * 16], [b * 16, 64]],
      run: (a, g) => tf.unsortedSegmentSum(g, ids(a) as tf.Tensor1D, 1000),
    },
  ];
}

/** Median ms of `run` on `backend`: repeats until ~300 ms or 25 runs (at least 2, the first discarded). */
function timeKernel(backend: KernelBackend, c: KernelCase): number {
  tf.setBackend(backend);
  const xs = c.inputs.map((shape, i) => tf.randomUniform(shape, -1, 1, 'float32', i + 1));
  const times: number[] = [];
  let spent = 0;
  for (let r = 0; r < 26 && (r < 3 || spent < 300); r++) {
    const t0 = performance.now();
    const y = c.run(...xs);
    y.dataSync();
    const ms = performance.now() - t0;
    y.dispose();
    if (r > 0) times.push(ms);
    spent += ms;
  }
  tf.dispose(xs);
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

const STEP_MODEL: TrainConfig = {
  model: 'alexnet-mini',
  data: 'synthetic-images',
  imageSize: [32, 32, 3],
  datasetSize: 8192,
  optimizer: 'sgd',
  lr: 0.01,
  momentum: 0.9,
};

export async function runKernelBench(opts: KernelBenchOptions): Promise<void> {
  const native = loadNativeAddon();
  const backends: KernelBackend[] = native.loaded ? ['native', 'cpu', 'wasm'] : ['cpu', 'wasm'];
  console.log(
    `kernels bench: alexnet-mini shapes, batch ${opts.batch}, one thread per engine; ${os.cpus().length} cores; ` +
      (native.loaded
        ? `native = oneDNN ${native.addon.version().onednn}`
        : `native backend unavailable (${native.reason})`),
  );
  for (const b of backends) await startBackend(tf, b);
  const kernels = [...alexnetMiniKernels(opts.batch), ...otherLayerKernels(opts.batch)].map(c => {
    const row: Record<string, number | string> = { kernel: c.name };
    for (const b of backends) row[b] = timeKernel(b, c);
    return row;
  });
  console.log(
    "\n(cpu = the tfjs cpu backend with tandem's Conv2DBackpropFilter: its stock one is a naive loop, ~seconds per " +
      'call here)',
  );
  console.log(
    `| kernel | ${backends.map(b => `${b} ms`).join(' | ')} ` +
      `|${backends.includes('native') ? ' cpu / native |' : ''}\n` +
      `|---|${backends.map(() => '---:').join('|')}|${backends.includes('native') ? '---:|' : ''}`,
  );
  for (const r of kernels) {
    const ratio = backends.includes('native') ? ` ${((r.cpu as number) / (r.native as number)).toFixed(1)}x |` : '';
    console.log(`| ${r.kernel} | ${backends.map(b => (r[b] as number).toFixed(3)).join(' | ')} |${ratio}`);
  }

  // Training steps, steady state, one device: each tandem backend that trains in reasonable time, then torch.
  const stepBackends: BackendName[] = native.loaded ? ['native', 'wasm'] : ['wasm'];
  const steps: { run: string; msPerStep: number; samplesPerSecond: number }[] = [];
  for (const backend of stepBackends) {
    const s = await train({ ...STEP_MODEL, backend, devices: 1, batch: opts.batch, steps: opts.steps });
    steps.push({
      run: `tandem ${backend}, 1 device`,
      msPerStep: s.steadyStepMs,
      samplesPerSecond: opts.batch / (s.steadyStepMs / 1000),
    });
  }
  const python = findTorchPython();
  let torch: Awaited<ReturnType<typeof runTorchReference>> | undefined;
  if (python) {
    torch = await runTorchReference(python, { mode: 'single', batch: opts.batch, steps: opts.steps, threads: 1 });
    steps.push({
      run: `PyTorch ${torch.torch}, 1 thread`,
      msPerStep: torch.msPerStep,
      samplesPerSecond: torch.samplesPerSecond,
    });
  } else {
    console.log('\n(no torch column: `python3 -c "import torch"` fails here; Debian: apt-get install python3-torch)');
  }
  console.log(
    `\nalexnet-mini training step, batch ${opts.batch}, steady state (${opts.steps} steps)\n| run | ms/step | ` +
      `samples/s |\n|---|---:|---:|`,
  );
  for (const s of steps) console.log(`| ${s.run} | ${s.msPerStep.toFixed(1)} | ${s.samplesPerSecond.toFixed(1)} |`);
  const nativeStep = steps.find(s => s.run.startsWith('tandem native'));
  const ratios = nativeStep && torch ? { nativeOverTorch: nativeStep.msPerStep / torch.msPerStep } : undefined;
  if (ratios)
    console.log(
      `\ntandem native / PyTorch single-thread step time = ${ratios.nativeOverTorch.toFixed(2)} (target <= 1.2)`,
    );

  const json = {
    bench: 'kernels',
    date: new Date().toISOString(),
    cores: os.cpus().length,
    options: opts,
    onednn: native.loaded ? native.addon.version() : null,
    kernels,
    steps,
    torch: torch ?? null,
    ratios: ratios ?? null,
  };
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(`${opts.out}/kernels.json`, JSON.stringify(json, null, 2));
  console.log(`\nJSON: ${opts.out}/kernels.json`);
}
