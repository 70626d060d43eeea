/**
 * The order in which a device's comm thread sends its groups each step: `ready` (one after the other, in the order
 * they become ready: transmission order), or `priority` (pipeline/priority-schedule.ts: groups in chunks; between
 * chunks the highest-priority group every rank has ready goes first). Each group's exchange is reported to the main
 * thread.
 */
import { wallNow } from '../monitor/span.js';
import { exchangedReport, type Sent } from './exchanged-report.js';
import type { GroupExchange } from '../pipeline/events.js';
import { chunksOf, runPriorityStep, type ExchangeChunk } from '../pipeline/priority-schedule.js';
import type { ControlBlock, Phase } from '../pipeline/control-block.js';
import type { CountingCollective } from '../pipeline/counting-collective.js';
import type { Collective } from '../collectives/collective.js';
import { probeEnter } from '../plugins/step-probes.js';
import type { CommStages } from './comm-stages.js';
import type { FromComm, ToComm } from './protocol.js';

/** What a comm thread's exchange loop works with. */
export interface ExchangeLoop {
  msg: ToComm;
  control: ControlBlock;
  at: (step: number, phase: Phase) => void;
  stages: CommStages;
  wire: CountingCollective;
  report: (m: FromComm) => void;
}

/** The step probes of the exchange phase (plugins'; tandem's tests inject faults there). */
function exchangeProbes(msg: ToComm, step: number): void {
  probeEnter({ thread: 'comm', phase: 'exchange', device: msg.device.rank, step }, msg.config.pluginOptions);
}

/** Reports a group's exchange to the main thread. */
function reportExchanged(x: ExchangeLoop, done: GroupExchange, sent: Sent, wireFloats: number): void {
  x.report(exchangedReport(x.msg.device.rank, x.msg.groups, 'comm', done, sent, wireFloats));
}

/** Groups one after the other, in the order they become ready (transmission order). */
export async function readyOrder(x: ExchangeLoop): Promise<void> {
  const { msg, control, at, stages, wire } = x;
  const {
    device: { local: device },
    config,
    groups,
  } = msg;
  for (let step = msg.firstStep; step <= config.steps; step++) {
    for (let g = 0; g < groups.length; g++) {
      at(step, 'exchange');
      const waitStart = wallNow();
      if (!control.waitGradsReady(device, g, step, `device ${device}'s gradients of step ${step}`)) return;
      exchangeProbes(msg, step);
      const sent = await stages.wire({ step, group: g, waitStart, waitEnd: wallNow() });
      const done = await stages.apply(sent);
      reportExchanged(x, done, [{ start: sent.exchangeStart!, end: sent.exchangeEnd!, label: '' }], wire.take());
    }
  }
}

/**
 * Priority order (pipeline/priority-schedule.ts): groups in chunks; between chunks the highest-priority group every
 * rank
 * has ready goes first. The agreement runs on the plain collective (not counted on `wire`: it is control, one float per
 * rank).
 */
export async function priorityOrder(x: ExchangeLoop, collective: Collective, chunkFloats: number): Promise<void> {
  const { msg } = x;
  const { config, groups } = msg;
  // A hook exchanges whole groups (its state is per group): one chunk each, priorities still apply between groups.
  const chunks = groups.map(g => (config.commHook ? chunksOf(g, g.end - g.start) : chunksOf(g, chunkFloats)));
  const agreement = { mine: new Float32Array(1), all: new Float32Array(collective.size), collective };
  for (let step = msg.firstStep; step <= config.steps; step++) {
    if (!(await priorityStep(x, step, chunks, agreement))) return;
  }
}

/** One step in priority order; false when the run was aborted. */
async function priorityStep(
  x: ExchangeLoop,
  step: number,
  chunks: ExchangeChunk[][],
  { mine, all, collective }: { mine: Float32Array; all: Float32Array; collective: Collective },
): Promise<boolean> {
  const { msg, control, at, stages, wire } = x;
  const {
    device: { local: device },
    groups,
  } = msg;
  at(step, 'exchange');
  const units = new Map<number, { unit: GroupExchange; sent: Sent; floats: number }>();
  const take = (g: number) => {
    // the group's first chunk: from here on its wait is over
    let u = units.get(g);
    if (!u) {
      const now = wallNow();
      u = { unit: { step, group: g, waitStart: now, waitEnd: now }, sent: [], floats: 0 };
      units.set(g, u);
      exchangeProbes(msg, step);
    }
    return u;
  };
  return runPriorityStep(chunks, {
    waitReady: g => {
      const waitStart = wallNow();
      if (!control.waitGradsReady(device, g, step, `device ${device}'s gradients of step ${step}`)) return false;
      take(g).unit.waitStart = waitStart;
      return true;
    },
    readyPrefix: () => {
      let k = 0;
      while (k < groups.length && control.gradsReady(device, k) >= step) k++;
      return k;
    },
    agree: async count => {
      mine[0] = count;
      await collective.allGather(mine, all);
      return Math.min(...all);
    },
    exchangeChunk: async (g, chunk) => {
      const u = take(g);
      const done = await stages.wire({ ...u.unit, chunk });
      const label = chunk.count > 1 ? ` ${chunk.index + 1}/${chunk.count}` : '';
      u.sent.push({ start: done.exchangeStart!, end: done.exchangeEnd!, label });
      u.floats += wire.take();
    },
    finish: async g => {
      const u = take(g);
      reportExchanged(x, await stages.apply(u.unit), u.sent, u.floats);
      at(step, 'exchange');
    },
  });
}
