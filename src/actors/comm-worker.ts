/**
 * Worker entry of a device's comm thread. It runs beside the compute thread:
 * for each step and each exchange group in order, it waits (Atomics) for the
 * compute side's hand-off, then runs the group through the comm half of the
 * gradient pipeline — all-reduce mean of its gradients through the run's
 * transport (or the run's communication hook in its place), the emulated link if any, the optimizer update of this device's
 * parameters in shared memory, publish "applied". Step 0 is the start: device
 * 0's initial parameters are broadcast to every replica.
 */
import { parentPort } from 'node:worker_threads';
import { lastValueFrom, of, tap, type OperatorFunction } from 'rxjs';
import { serializeError } from '../errors.js';
import { openCollective } from '../collectives/transport-registry.js';
import { getEngine } from '../engine/engine-registry.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { allReduceGroup } from '../pipeline/operators/all-reduce-group.js';
import { commHookGroup } from '../pipeline/operators/comm-hook-group.js';
import { loadCommHook } from '../pipeline/comm-hooks.js';
import { HookStates } from '../pipeline/hook-states.js';
import { CountingCollective } from '../pipeline/counting-collective.js';
import { emulateLink } from '../pipeline/operators/emulate-link.js';
import { applyGroupUpdate } from '../pipeline/operators/apply-group-update.js';
import { publishApplied } from '../pipeline/operators/publish-applied.js';
import type { GroupExchange } from '../pipeline/events.js';
import { MAX_GROUPS } from '../pipeline/strategy.js';
import { wallNow, type Span } from '../monitor/span.js';
import { ControlBlock, threadWaitMs, type Phase } from './control-block.js';
import { injectFault, perturbParameter, type InjectedFault } from './fault-injection.js';
import { StepPreimage } from './step-preimage.js';
import { gradSlots, modelStateSlots, optimizerStateOf, paramSlots } from './shared-buffers.js';
import type { FromComm, ToComm } from './protocol.js';
import type { Collective } from '../collectives/collective.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';

if (!parentPort) throw new Error('comm-worker must run as a worker thread');
const port = parentPort;

port.once('message', (msg: ToComm) => {
  let step = 0;
  let phase: Phase = 'setup';
  const { local, rank } = msg.device;
  const send = (m: FromComm) => port.postMessage(m);
  const control = new ControlBlock(msg.control, msg.config.topology.localDevices, MAX_GROUPS, threadWaitMs(msg.config.stallTimeoutMs, msg.config.topology.processes));
  control.owner = { device: local, side: 'comm' };
  loadPlugins(msg.config.plugins)
    .then(() => run(msg, control, (s, p) => { step = s; phase = p; control.setPhase(local, p, s, 'comm'); }))
    .then(() => send({ type: 'stopped', device: rank }))
    .catch(err => send({ type: 'error', device: rank, step, phase, error: serializeError(err) }))
    .finally(() => port.close());
});

async function run(msg: ToComm, control: ControlBlock, at: (step: number, phase: Phase) => void): Promise<void> {
  const { device: { local: device }, config } = msg;
  const arithmetic = getEngine(config.backend).arithmetic();
  const collective = openCollective(msg.collective, {
    timeoutMs: 2 * config.stallTimeoutMs, isAborted: () => control.aborted, heartbeat: () => control.beat(device, 'comm'), reducer: arithmetic,
  });
  try {
    await exchangeSteps(msg, control, at, collective, arithmetic);
  } finally {
    collective.close();
  }
}

async function exchangeSteps(msg: ToComm, control: ControlBlock, at: (step: number, phase: Phase) => void,
  collective: Collective, arithmetic: FlatArithmetic): Promise<void> {
  const { device: { local: device, rank }, config, buffers, groups } = msg;
  const params = paramSlots(buffers), grads = gradSlots(buffers);
  const fi = config.faultInjection;

  // The comm half of the pipeline, one group at a time: the all-reduce, or the run's hook in its place.
  const wire = new CountingCollective(collective);
  const hook = config.commHook;
  const stages: OperatorFunction<GroupExchange, GroupExchange>[] = [hook
    ? commHookGroup(await hookStates(msg, collective), wire, grads[device], groups)
    : allReduceGroup(wire, grads[device], groups)];
  if (config.link) stages.push(emulateLink(config.link, config.devices, groups));
  stages.push(tap(unit => { // the update phase begins
    at(unit.step, 'update');
    if (fi && fi.device === rank && fi.step === unit.step && fi.phase === 'update' && fi.kind !== 'perturb') injectFault(fi.kind as InjectedFault, 'update');
  }));
  if (device === 0 && buffers.preimage) { // what the update overwrites, for a checkpoint of an aborted run
    const preimage = new StepPreimage(buffers.preimage, groups.length, buffers.total, buffers.stateSlots);
    const state = optimizerStateOf(buffers, device);
    stages.push(tap(unit => preimage.save(unit.group, groups.length, groups[unit.group], unit.step, params[device], state)));
  }
  stages.push(applyGroupUpdate(config.optimizer, params[device], grads[device], optimizerStateOf(buffers, device), groups, config.onNan === 'skip-step', arithmetic));
  if (fi?.kind === 'perturb' && fi.device === rank) { // test fault: this replica differs after fi.step's update of group 0
    stages.push(tap(unit => { if (unit.step === fi.step && unit.group === 0) perturbParameter(params[device], groups[0].start); }));
  }
  stages.push(publishApplied(control, device));
  const exchange = (unit: GroupExchange) =>
    lastValueFrom(stages.reduce((obs, op) => obs.pipe(op), of(unit)));

  at(0, 'setup');
  for (let g = 0; g < groups.length; g++) {
    if (!control.waitGradsReady(device, g, 0, `device ${device}'s compute thread to build its model`)) return;
  }
  await collective.broadcast(params[device], 0, 0, buffers.total); // not counted: `wire` measures the gradient exchange
  if (buffers.stateTotal > 0) await collective.broadcast(modelStateSlots(buffers)[device], 0, 0, buffers.stateTotal); // non-trainable weights too
  // Parameters in place: as if step firstStep-1 had just been applied (0, or a resumed checkpoint's step).
  for (let g = 0; g < groups.length; g++) control.markApplied(device, g, msg.firstStep - 1);

  for (let step = msg.firstStep; step <= config.steps; step++) {
    for (let g = 0; g < groups.length; g++) {
      at(step, 'exchange');
      const waitStart = wallNow();
      if (!control.waitGradsReady(device, g, step, `device ${device}'s gradients of step ${step}`)) return;
      if (fi && fi.device === rank && fi.step === step && fi.phase === 'exchange' && fi.kind !== 'perturb') injectFault(fi.kind as InjectedFault, 'exchange');
      const done = await exchange({ step, group: g, waitStart, waitEnd: wallNow() });
      const wireFloats = wire.take();
      const name = groups[g].name;
      const span = (kind: Span['kind'], label: string, start: number, end: number): Span => ({ device: rank, thread: 'comm', kind, name: label, step, group: g, start, end });
      const spans = [
        span('wait', `wait ${name}`, done.waitStart, done.waitEnd),
        span('exchange', `exchange ${name}`, done.exchangeStart!, done.exchangeEnd!),
        span('apply', `apply ${name}`, done.applyStart!, done.applyEnd!),
      ];
      port.postMessage({
        type: 'exchanged', device: rank, step, group: g, waitMs: done.waitEnd - done.waitStart,
        exchangeMs: done.exchangeEnd! - done.exchangeStart!, updateMs: done.applyEnd! - done.applyStart!, spans,
        carried: { start: groups[g].start, end: groups[g].end }, skipped: done.skipped === true, wireFloats,
      } satisfies FromComm);
    }
  }
}

/** The run's hook's states of every group: restored from a checkpoint, shared with the main thread when it checkpoints. */
async function hookStates(msg: ToComm, collective: Collective): Promise<HookStates> {
  const { config: { commHook, seed }, groups, variables, hookState } = msg;
  const states = new HookStates(await loadCommHook(commHook!.name, commHook!.module), commHook!.options, groups, variables, collective.rank, collective.size, seed);
  if (hookState?.restore) states.restore(hookState.restore, hookState.source ?? 'checkpoint');
  if (hookState?.share) port.postMessage({ type: 'hookState', device: msg.device.rank, arrays: states.share() } satisfies FromComm);
  return states;
}
