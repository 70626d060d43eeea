/**
 * Worker entry of a device's comm thread. It runs beside the compute thread:
 * waits (Atomics) for each group's gradients, all-reduces them with the peers'
 * comm threads, applies the optimizer update to this device's parameters in
 * shared memory, and publishes the group as applied. Step 0 is the start:
 * device 0's initial parameters are broadcast to every replica.
 */
import { parentPort } from 'node:worker_threads';
import { serializeError } from '../errors.js';
import { applyUpdate } from '../optim/flat-optimizer.js';
import { SharedMemoryCollective } from '../collectives/shared-memory-collective.js';
import { ControlBlock, type Phase } from './control-block.js';
import { gradSlots, optimizerStateOf, paramSlots } from './shared-buffers.js';
import type { FromComm, ToComm } from './protocol.js';

if (!parentPort) throw new Error('comm-worker must run as a worker thread');
const port = parentPort;

port.once('message', (msg: ToComm) => {
  let step = 0;
  let phase: Phase = 'setup';
  const send = (m: FromComm) => port.postMessage(m);
  const control = new ControlBlock(msg.control, msg.config.devices, msg.groups.length, msg.config.stallTimeoutMs);
  run(msg, control, (s, p) => { step = s; phase = p; control.setPhase(msg.device, p, s, 'comm'); })
    .then(() => send({ type: 'stopped', device: msg.device }))
    .catch(err => send({ type: 'error', device: msg.device, step, phase, error: serializeError(err) }))
    .finally(() => port.close());
});

async function run(msg: ToComm, control: ControlBlock, at: (step: number, phase: Phase) => void): Promise<void> {
  const { device, config, buffers, groups } = msg;
  const collective = new SharedMemoryCollective(config.allReduce, device, config.devices, control);
  const params = paramSlots(buffers), grads = gradSlots(buffers);
  const mine = params[device], myGrads = grads[device];
  const state = optimizerStateOf(buffers, device);
  const fi = config.faultInjection;

  at(0, 'setup');
  for (let g = 0; g < groups.length; g++) {
    if (!control.waitGradsReady(device, g, 0, `device ${device}'s compute thread to build its model`)) return;
  }
  await collective.broadcast(params, 0, 0, buffers.total);
  for (let g = 0; g < groups.length; g++) control.markApplied(device, g, 0);

  for (let step = 1; step <= config.steps; step++) {
    for (let g = 0; g < groups.length; g++) {
      const { start, end } = groups[g];
      at(step, 'exchange');
      const t0 = performance.now();
      if (!control.waitGradsReady(device, g, step, `device ${device}'s gradients of step ${step}`)) return;
      if (fi && fi.device === device && fi.step === step && fi.phase === 'exchange') {
        if (fi.kind === 'exit') process.exit(3);
        throw new Error('injected fault (throw) in exchange');
      }
      const t1 = performance.now();
      await collective.allReduceMean(grads, start, end);
      const t2 = performance.now();
      at(step, 'update');
      applyUpdate(config.optimizer, mine, myGrads, state, start, end, step);
      control.markApplied(device, g, step);
      const t3 = performance.now();
      port.postMessage({ type: 'exchanged', device, step, group: g, waitMs: t1 - t0, exchangeMs: t2 - t1, updateMs: t3 - t2 } satisfies FromComm);
    }
  }
}
