/** The text report of `tandem profile`: per-layer table, verdict, predicted step times. */
import type { ModelProfile } from '../profiling/layer-profile.js';
import { layerTimeMs } from '../profiling/layer-profile.js';
import { marginSentence, type AlexNetVerdict } from '../profiling/alexnet-like.js';
import type { Prediction } from '../profiling/cost-model.js';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

export function profileReport(
  profile: ModelProfile,
  verdict: AlexNetVerdict,
  predictions: Prediction[],
  devices: number,
  link?: string,
): string {
  const lines: string[] = [];
  lines.push(
    `profile of ${profile.model} on ${profile.backend}, ${profile.batch} samples per device; ` +
      `${profile.measuredSteps} measured steps after ${profile.warmupSteps} warm-up`,
  );
  lines.push(
    `clock: ${profile.clock.kind} — ${profile.clock.reason}; each layer's time is the median of ${profile.reps} ` +
      `repetitions`,
  );
  lines.push(
    `measured step: forward ${profile.stepForwardMs.toFixed(1)} ms, backward ${profile.stepBackwardMs.toFixed(1)} ` +
      `ms, per-step overhead ${profile.overheadMs.toFixed(2)} ms`,
  );
  if (profile.calibration) lines.push(calibrationLine(profile, profile.calibration));
  lines.push(
    'layers in transmission order (output layer first); times are per-layer measurements scaled to the measured step',
  );
  lines.push(...layerTable(profile, verdict));
  lines.push('');
  lines.push(
    `verdict: ${verdict.alexnetLike ? 'AlexNet-like' : 'not AlexNet-like'} (conditions: time share <= ` +
      `${pct(verdict.conditions.timeShare)}, remaining-parameter share <= ${pct(verdict.conditions.paramShare)})`,
  );
  lines.push(`  ${verdict.reason}`);
  lines.push(`  ${marginSentence(verdict)}`);
  lines.push(
    `  p = ${verdict.p}; FC group: ${verdict.fcGroup.join(', ') || '(none)'}; conv group: ` +
      `${verdict.convGroup.join(', ') || '(none)'}`,
  );
  lines.push('');
  lines.push(
    `predicted step time on ${devices} device(s), link ` +
      `${link ? `${link} (EMULATED in training runs)` : 'none (shared memory)'}:`,
  );
  lines.push('| strategy | groups | predicted ms | compute ms | comm ms | lower bound ms |');
  lines.push('|---|---:|---:|---:|---:|---:|');
  for (const p of predictions)
    lines.push(
      `| ${p.strategy} | ${p.groups.length} | ${p.stepMs.toFixed(1)} | ${p.computeMs.toFixed(1)} | ` +
        `${p.commMs.toFixed(1)} | ${p.lowerBoundMs.toFixed(1)} |`,
    );
  return lines.join('\n');
}

/** How the profile was calibrated on a real run, and what the process spent per step. */
function calibrationLine(profile: ModelProfile, c: NonNullable<ModelProfile['calibration']>): string {
  const cpu =
    c.cpuMsPerStep === undefined
      ? ''
      : `, process CPU ${c.cpuMsPerStep.toFixed(1)} ms per ${c.steadyStepMs.toFixed(1)} ms step`;
  return (
    `calibrated on a real ${c.devices}-device run (sequential, shared memory): layer times ` +
    `x${c.computeScale.toFixed(2)}, runtime overhead ${profile.overheadMs.toFixed(1)} ms per step${cpu}`
  );
}

/** Each layer's times and parameters with their shares, in transmission order, p marked. */
function layerTable(profile: ModelProfile, verdict: AlexNetVerdict): string[] {
  const total = profile.layers.reduce((s, l) => s + layerTimeMs(l), 0);
  const params = profile.layers.reduce((s, l) => s + l.parameters, 0);
  const lines = [
    '| # | layer | class | fwd ms | bwd ms | time share | cumulative | parameters | param share |',
    '|---:|---|---|---:|---:|---:|---:|---:|---:|',
  ];
  let cum = 0;
  profile.layers.forEach((l, i) => {
    cum += layerTimeMs(l);
    const mark = i + 1 === verdict.p ? ' <- p' : '';
    lines.push(
      `| ${i + 1} | ${l.name}${mark} | ${l.className} | ${l.forwardMs.toFixed(2)} | ${l.backwardMs.toFixed(2)} | ` +
        `${pct(layerTimeMs(l) / total)} | ${pct(cum / total)} | ${l.parameters} | ` +
        `${pct(params ? l.parameters / params : 0)} |`,
    );
  });
  return lines;
}
