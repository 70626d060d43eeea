/** What `--strategy auto` reports of its choice: the JSON event (`--json`), or the line of flags it set. */
import type { AutoChoice } from '../profiling/choose-strategy.js';
import { linkBitsPerSecond } from '../profiling/link-fit.js';

/** `--json`: the auto event, with the link, the CPU ceiling's inputs and every candidate's prediction. */
export function autoEvent(c: AutoChoice): Record<string, unknown> {
  return {
    event: 'auto',
    strategy: c.strategy,
    splitLayer: c.splitLayer,
    forwardWait: c.forwardWait,
    exchangeOrder: c.exchangeOrder,
    chunkFloats: c.chunkFloats,
    commHook: c.commHook,
    predictedMs: c.predictedMs,
    reason: c.reason,
    link: c.link && {
      alphaMs: c.link.alphaMs,
      bitsPerSecond: linkBitsPerSecond(c.link),
      source: c.link.source,
      samples: c.link.samples,
      cpuAlphaMs: c.link.cpuAlphaMs,
      cpuMsPerWireByte: c.link.cpuMsPerWireByte,
    },
    cpu: { ...c.cpu, cpuMsPerStep: c.cpuMsPerStep, bound: c.cpuBound },
    candidates: c.candidates.map(x => ({
      key: x.key,
      predictedMs: x.predictedMs,
      splitLayer: x.splitLayer,
      cpuMsPerStep: x.cpuMsPerStep,
      cpuBound: x.cpuBound,
    })),
  };
}

/**
 * What `auto` prints beside its event's line (the reason: the link, the profile, the top candidates): the flags it set.
 */
export function autoLines(c: AutoChoice): string[] {
  return [
    `auto: runs --strategy ${c.strategy}${c.splitLayer ? ` --split-layer ${c.splitLayer}` : ''} --forward-wait ` +
      `${c.forwardWait} --exchange-order ${c.exchangeOrder}${c.chunkFloats ? ` --chunk-floats ${c.chunkFloats}` : ''}` +
      `${c.commHook ? ` --comm-hook ${c.commHook}` : ''}: predicted ${c.predictedMs.toFixed(1)} ms/step`,
  ];
}
