/**
 * `npm run bench -- profile`: for alexnet-mini and convnet-gap on 2 devices,
 * the profile, the AlexNet-like verdict, and the cost model's predicted step
 * time beside the measured (steady-state) step time for every strategy at
 * several link speeds. Links are EMULATED (see the link model).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { train, type TrainConfig } from '../src/index.js';
import { profileModel } from '../src/profiling/profile-model.js';
import { decideAlexNetLike } from '../src/profiling/alexnet-like.js';
import { predictStrategies, PREDICTED_STRATEGIES } from '../src/profiling/cost-model.js';
import { parseLink } from '../src/pipeline/link-model.js';
import { profileReport } from '../src/cli/profile-report.js';

export interface ProfileBenchOptions {
  steps: number;
  perDeviceBatch: number;
  links: string[];
  models: string[];
  out: string;
}

export async function runProfileBench(opts: ProfileBenchOptions): Promise<void> {
  const rows: Record<string, unknown>[] = [];
  for (const model of opts.models) {
    const base: TrainConfig = {
      model,
      data: 'synthetic-images',
      imageSize: [32, 32, 3],
      datasetSize: 8192,
      devices: 2,
      batch: 2 * opts.perDeviceBatch,
      steps: opts.steps,
      optimizer: 'sgd',
      lr: 0.01,
      momentum: 0.9,
    };
    const profile = await profileModel(base, train);
    const verdict = decideAlexNetLike(profile.layers);
    const predictions = predictStrategies(profile, 2, { bucketCapMB: 0.5, firstBucketMB: 0.125 });
    console.log(`\n${profileReport(profile, verdict, predictions, 2)}`);
    console.log(`\npredicted vs measured, ${model}, 2 devices (links EMULATED)`);
    console.log('| link | strategy | predicted ms | measured ms | error |\n|---|---|---:|---:|---:|');
    for (const linkText of opts.links) {
      const link = linkText === 'none' ? undefined : parseLink(linkText);
      const preds = predictStrategies(profile, 2, { bucketCapMB: 0.5, firstBucketMB: 0.125 }, link);
      for (const strategy of PREDICTED_STRATEGIES) {
        const measured = (await train({ ...base, strategy, link: linkText })).steadyStepMs;
        const predicted = preds.find(p => p.strategy === strategy)!.stepMs;
        const error = (predicted - measured) / measured;
        console.log(
          `| ${linkText}${link ? ' (emulated)' : ''} | ${strategy} | ${predicted.toFixed(1)} | ` +
            `${measured.toFixed(1)} | ${(error * 100).toFixed(1)}% |`,
        );
        rows.push({
          model,
          link: linkText,
          emulated: !!link,
          strategy,
          predictedMs: predicted,
          measuredMs: measured,
          errorPct: error * 100,
        });
      }
    }
    const worst = Math.max(...rows.filter(r => r.model === model).map(r => Math.abs(r.errorPct as number)));
    console.log(
      `${model}: worst |error| ${worst.toFixed(1)}% (${worst <= 15 ? 'within' : 'NOT within'} 15%); verdict: ` +
        `${verdict.alexnetLike ? 'AlexNet-like' : 'not AlexNet-like'}`,
    );
  }
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/profile.json`,
    JSON.stringify(
      { bench: 'profile', date: new Date().toISOString(), options: opts, note: 'links are emulated', rows },
      null,
      2,
    ),
  );
  console.log(`\nJSON: ${opts.out}/profile.json`);
}
