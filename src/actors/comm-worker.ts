/**
 * Worker entry of a device's comm thread. It runs beside the compute thread:
 * for each step and each exchange group in order (or, with `exchangeOrder`
 * `priority`, chunk by chunk in the order of pipeline/priority-schedule.ts),
 * it waits (Atomics) for the compute side's hand-off, then runs the group through the comm half of the
 * gradient pipeline — all-reduce mean of its gradients through the run's
 * transport (or the run's communication hook in its place), the emulated link if any, the optimizer update of this
 * device's
 * parameters in shared memory, publish "applied". With `localUpdate: 'shard'` (one process's devices): a reduce-scatter
 * in place of the all-reduce, and the update of this device's shard written into every replica of the process. Step 0
 * is the start: device
 * 0's initial parameters are broadcast to every replica.
 */
import { parentPort } from 'node:worker_threads';
import { serializeError } from '../errors.js';
import { openCollective } from '../collectives/transport-registry.js';
import { getEngine } from '../engine/engine-registry.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { CountingCollective } from '../pipeline/counting-collective.js';
import { MAX_GROUPS } from '../pipeline/strategy.js';
import { ControlBlock, firstStepWaitMs, setupWatchdogMs, threadWaitMs, type Phase } from '../pipeline/control-block.js';
import { modelStateSlots, paramSlots } from './shared-buffers.js';
import type { FromComm, ToComm } from './protocol.js';
import type { Collective, CollectiveEnv } from '../collectives/collective.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';
import { scheduledArithmetic } from '../optim/lr-schedule.js';
import { peerWaitMs } from '../world/peer-wait.js';
import { commStages } from './comm-stages.js';
import { priorityOrder, readyOrder, type ExchangeLoop } from './exchange-orders.js';
import { nameThisThread } from '../engine/thread-name.js';

if (!parentPort) throw new Error('comm-worker must run as a worker thread');
const port = parentPort;

port.once('message', (msg: ToComm) => {
  let step = 0;
  let phase: Phase = 'setup';
  const { local, rank } = msg.device;
  nameThisThread('comm', rank);
  const send = (m: FromComm) => port.postMessage(m);
  const control = new ControlBlock(
    msg.control,
    msg.config.topology.localDevices,
    MAX_GROUPS,
    threadWaitMs(msg.config.stallTimeoutMs, msg.config.topology.processes),
  );
  control.owner = { device: local, side: 'comm' };
  control.setupWaitsThrough(msg.firstStep, firstStepWaitMs(msg.config.stallTimeoutMs, msg.config.topology.processes));
  loadPlugins(msg.config.plugins)
    .then(() =>
      run(msg, control, (s, p) => {
        step = s;
        phase = p;
        control.setPhase(local, p, s, 'comm');
      }),
    )
    .then(() => send({ type: 'stopped', device: rank }))
    .catch(err => send({ type: 'error', device: rank, step, phase, error: serializeError(err) }))
    .finally(() => port.close());
});

async function run(msg: ToComm, control: ControlBlock, at: (step: number, phase: Phase) => void): Promise<void> {
  const {
    device: { local: device },
    config,
  } = msg;
  const arithmetic = scheduledArithmetic(getEngine(config.backend).arithmetic(), config.lrSchedule);
  const steadyMs = peerWaitMs(config.stallTimeoutMs);
  const env: CollectiveEnv = {
    timeoutMs: steadyMs,
    isAborted: () => control.aborted,
    heartbeat: () => control.beat(device, 'comm'),
    reducer: arithmetic,
  };
  const collective = openCollective(msg.collective, env); // the local transports read env.timeoutMs at each wait
  // One process: its devices' waits on each other (the step-0 broadcast waits for every model's build, the first
  // exchange for every cold first pass, the second for every first update) are setup's for two steps; the main
  // thread's watchdog still names a hung thread. Several processes: a peer's wait keeps its own rules (PEER_LOST
  // after peerWaitMs).
  if (config.topology.processes === 1) env.timeoutMs = peerWaitMs(setupWatchdogMs(config.stallTimeoutMs));
  const steady = (s: number, p: Phase) => {
    if (s > msg.firstStep + 1) env.timeoutMs = steadyMs;
    at(s, p);
  };
  try {
    await exchangeSteps(msg, control, steady, collective, arithmetic);
    // No rank closes its connections while a peer may still be reading its last exchange (across hosts, a close with
    // data in flight can lose it): every rank of the communicator meets here first.
    if (!control.aborted) await collective.barrier();
  } finally {
    collective.close();
  }
}

async function exchangeSteps(
  msg: ToComm,
  control: ControlBlock,
  at: (step: number, phase: Phase) => void,
  collective: Collective,
  arithmetic: FlatArithmetic,
): Promise<void> {
  const {
    device: { local: device },
    config,
    buffers,
    groups,
  } = msg;
  const params = paramSlots(buffers);
  const wire = new CountingCollective(collective);
  const report = (m: FromComm) => port.postMessage(m);
  const stages = await commStages(msg, control, at, wire, arithmetic, report);

  at(0, 'setup');
  for (let g = 0; g < groups.length; g++) {
    if (!control.waitGradsReady(device, g, 0, `device ${device}'s compute thread to build its model`)) return;
  }
  await collective.broadcast(params[device], 0, 0, buffers.total); // not counted: `wire` measures the gradient exchange
  // non-trainable weights too
  if (buffers.stateTotal > 0) await collective.broadcast(modelStateSlots(buffers)[device], 0, 0, buffers.stateTotal);
  // Parameters in place: as if step firstStep-1 had just been applied (0, or a resumed checkpoint's step).
  for (let g = 0; g < groups.length; g++) control.markApplied(device, g, msg.firstStep - 1);
  // a world of one device on one CPU: its compute thread updates (inline-update.ts), nothing is exchanged
  if (buffers.updatesOnCompute) return at(msg.firstStep - 1, 'idle');

  const loop: ExchangeLoop = { msg, control, at, stages, wire, report };
  const exchange = config.exchange;
  switch (exchange.order) {
    case 'ready':
      return readyOrder(loop);
    case 'priority':
      return priorityOrder(loop, collective, exchange.chunkFloats);
    default: {
      const never: never = exchange;
      throw new Error(`unknown exchange order ${JSON.stringify(never)}`);
    }
  }
}
