/**
 * `npm run bench -- classifier`: many classes (1k, 10k, 100k), embedding 128,
 * 2 devices, the same data and step budget for
 *  (a) data parallel with a replicated full classifier,
 *  (b) local-head (method B),
 *  (c) partial-fc at sample rates 1.0 and 0.1.
 * Prints samples/s, classifier bytes held per device, bytes exchanged per
 * step per device, and held-out accuracy; writes JSON.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';

export interface ClassifierBenchOptions {
  classes: number[];
  steps: number;
  batch: number;
  out: string;
}

const MODEL_MODULE = fileURLToPath(new URL('./models/mlp-classifier.js', import.meta.url));

export async function runClassifierBench(opts: ClassifierBenchOptions): Promise<void> {
  const rows: Record<string, unknown>[] = [];
  console.log(
    `classifier bench: mlp extractor (embedding 128) on synthetic 16x16x1 images, 2 devices, global batch ` +
      `${opts.batch}, ${opts.steps} steps, adam`,
  );
  console.log(
    '| classes | method | samples/s | classifier bytes per device | exchanged bytes per step per device | held-out ' +
      'accuracy |\n|---:|---|---:|---:|---:|---|',
  );
  for (const classes of opts.classes) {
    const base: TrainConfig = {
      data: 'synthetic-images',
      imageSize: [16, 16, 1],
      classes,
      datasetSize: Math.max(20_000, 3 * classes),
      heldOut: 4000,
      evalSamples: 2000,
      devices: 2,
      batch: opts.batch,
      steps: opts.steps,
      optimizer: 'adam',
      lr: 0.002,
    };
    const runs: [string, TrainConfig][] = [
      ['(a) data-parallel, full classifier', { ...base, model: MODEL_MODULE }],
      ['(b) local-head (method B)', { ...base, model: 'mlp', method: 'local-head', embedding: 128 }],
      [
        '(c) partial-fc, sample rate 1.0',
        { ...base, model: 'mlp', method: 'partial-fc', embedding: 128, sampleRate: 1 },
      ],
      [
        '(c) partial-fc, sample rate 0.1',
        { ...base, model: 'mlp', method: 'partial-fc', embedding: 128, sampleRate: 0.1 },
      ],
    ];
    for (const [name, cfg] of runs) {
      const s: TrainSummary = await train(cfg);
      const classifierWeights = s.weights.filter(w => w.name.startsWith('classifier'));
      const classifierBytes = s.classifier
        ? Math.max(...s.classifier.classifierBytesPerDevice)
        : classifierWeights.reduce((n, w) => n + w.values.length * 4, 0);
      const exchanged = s.classifier ? s.classifier.exchangedBytesPerStep : s.parameters * 4;
      const accuracy = s.classifier
        ? `centre ${(100 * (s.classifier.heldOut?.centreAccuracy ?? 0)).toFixed(1)}%, classifier ` +
          `${(100 * (s.classifier.heldOut?.classifierAccuracy ?? 0)).toFixed(1)}%`
        : `classifier ${(100 * (s.heldOut?.accuracy ?? 0)).toFixed(1)}%`;
      console.log(
        `| ${classes} | ${name} | ${s.samplesPerSecond.toFixed(0)} | ${classifierBytes} | ${exchanged} | ${accuracy} |`,
      );
      rows.push({
        classes,
        method: name,
        samplesPerSecond: s.samplesPerSecond,
        classifierBytesPerDevice: classifierBytes,
        exchangedBytesPerStep: exchanged,
        heldOut: s.classifier?.heldOut ?? s.heldOut,
      });
    }
  }
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/classifier.json`,
    JSON.stringify({ bench: 'classifier', date: new Date().toISOString(), options: opts, rows }, null, 2),
  );
  console.log(`\nJSON: ${opts.out}/classifier.json`);
}
