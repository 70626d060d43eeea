/** The lines `tandem train` prints when the run is done: the outcome, the method's part, and where outputs went. */
import type { TrainSummary } from '../trainer/train.js';
import { describeProcess } from '../world/topology.js';

type Summary = TrainSummary;

/** `verbose`: a host other than 0 prints the full summary too. */
export function printSummary(summary: Summary, json: boolean, verbose: boolean): void {
  const { weights, history, ...rest } = summary;
  void weights;
  void history;
  const { topology } = summary.config;
  if (json) console.log(JSON.stringify({ event: 'summary', ...rest }));
  else if (topology.process > 0 && !verbose) {
    console.log(
      `${describeProcess(topology, topology.process)} of ${topology.processes} done: ${summary.steps} steps, ` +
        `replica checksum ${summary.replicaChecksum} ` +
        `(${describeProcess(topology, 0)} shows the world and writes the outputs)`,
    );
  } else printFullSummary(summary);
}

function printFullSummary(summary: Summary): void {
  const { topology } = summary.config;
  console.log(
    `done: ${summary.steps} steps on ${summary.config.devices} device(s) (${summary.config.backend}` +
      `${summary.config.precision === 'fp32' ? '' : `, ${summary.config.precision}`}), ` +
      `final loss ${summary.finalLoss.toFixed(4)}, ` +
      // regression: no accuracy
      (Number.isNaN(summary.finalAccuracy) ? '' : `batch accuracy ${(summary.finalAccuracy * 100).toFixed(1)}%, `) +
      `${summary.samplesPerSecond.toFixed(0)} samples/s`,
  );
  if (topology.processes > 1)
    console.log(
      `${describeProcess(topology, topology.process)} of ${topology.processes}: replica checksum ` +
        `${summary.replicaChecksum}` +
        `${topology.process === 0 ? '' : ` (${describeProcess(topology, 0)} writes the outputs)`}`,
    );
  if (summary.link) console.log(`link: EMULATED ${summary.link.label} (exchange held to that link's speed)`);
  console.log(
    `strategy: ${summary.strategy.name} (${summary.strategy.groups.length} exchange group(s)); ` +
      (`mean step ${summary.meanStepMs.toFixed(1)} ms, compute ${summary.timings.meanComputeMs.toFixed(1)} ms, ` +
        `exchange ${summary.timings.meanExchangeMs.toFixed(1)} ms per group`),
  );
  for (const sk of summary.skippedUpdates)
    console.warn(
      `warning: step ${sk.step}, group ${sk.group}: update skipped, non-finite gradient (first: ` +
        `${sk.variable ?? 'unknown'})`,
    );
  const stop = summary.earlyStop;
  if (stop)
    console.log(
      `early stopping after epoch ${stop.epoch}: best ${stop.monitor} ${stop.best.toPrecision(4)} at epoch ` +
        `${stop.bestEpoch}`,
    );
  const monitor = summary.config.epochLogs?.keepBest?.monitor;
  for (const kept of summary.bestEpochs ?? [])
    console.log(`kept: epoch ${kept.epoch}, ${monitor} ${kept.value.toPrecision(4)}: ${kept.dir}`);
  if (summary.heldOut)
    console.log(
      `held-out accuracy: ${(summary.heldOut.accuracy * 100).toFixed(2)}% on ${summary.heldOut.samples} samples`,
    );
  printClassifier(summary);
  const cl = summary.classifier;
  if (summary.modelPath) console.log(`model${cl ? ' (feature extractor)' : ''}: ${summary.modelPath}`);
  if (summary.tracePath) console.log(`trace: ${summary.tracePath} (open in Perfetto or chrome://tracing)`);
  if (summary.timelinePath) console.log(`timeline picture: ${summary.timelinePath}`);
  if (summary.config.out) console.log(`summary: ${summary.config.out}/summary.json`);
}

function printClassifier(summary: Summary): void {
  const cl = summary.classifier;
  if (!cl) return;
  console.log(
    `${cl.method}: ${cl.classes} classes as ${cl.localClasses.join(' + ')} per device; classifier bytes per device ` +
      `${cl.classifierBytesPerDevice.join(', ')}; ` +
      `exchanged per step ${(cl.exchangedBytesPerStep / 2 ** 20).toFixed(2)} MiB`,
  );
  if (cl.heldOut)
    console.log(
      `held-out (${cl.heldOut.samples} samples): nearest class-centre accuracy ${
        cl.heldOut.centreAccuracy === undefined
          ? 'n/a (no odd-numbered held-out sample of a class with a centre: hold out more samples, --held-out, ' +
            '--eval-samples)'
          : `${(cl.heldOut.centreAccuracy * 100).toFixed(1)}% (${cl.heldOut.centreProbes} probes)`
      }, ` + `full-classifier accuracy ${((cl.heldOut.classifierAccuracy ?? 0) * 100).toFixed(1)}%`,
    );
  if (cl.classifierPath) console.log(`classifier (all ${cl.classes} classes): ${cl.classifierPath}`);
}
