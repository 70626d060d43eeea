/**
 * Worker entry of a device's comm thread. It runs beside the compute thread:
 * for each step and each exchange group in order (or, with `exchangeOrder`
 * `priority`, chunk by chunk in the order of pipeline/priority-schedule.ts),
 * it waits (Atomics) for the compute side's hand-off, then runs the group through the comm half of the
 * gradient pipeline — all-reduce mean of its gradients through the run's
 * transport (or the run's communication hook in its place), the emulated link if any, the optimizer update of this device's
 * parameters in shared memory, publish "applied". With `localUpdate: 'shard'` (one process's devices): a reduce-scatter
 * in place of the all-reduce, and the update of this device's shard written into every replica of the process. Step 0 is the start: device
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
import { applyShardUpdate, type LocalReplicas } from '../pipeline/operators/apply-shard-update.js';
import { reduceScatterGroup, type ShardingCollective } from '../pipeline/operators/reduce-scatter-group.js';
import { publishApplied } from '../pipeline/operators/publish-applied.js';
import type { GroupExchange } from '../pipeline/events.js';
import { MAX_GROUPS } from '../pipeline/strategy.js';
import { chunksOf, runPriorityStep } from '../pipeline/priority-schedule.js';
import { wallNow, type Span } from '../monitor/span.js';
import { ControlBlock, threadWaitMs, type Phase } from '../pipeline/control-block.js';
import { injectFault, perturbParameter, type InjectedFault } from './fault-injection.js';
import { StepPreimage } from './step-preimage.js';
import { gradSlots, modelStateSlots, optimizerStateOf, paramSlots } from './shared-buffers.js';
import type { FromComm, ToComm } from './protocol.js';
import type { Collective } from '../collectives/collective.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';
import { peerWaitMs } from '../world/peer-wait.js';

if (!parentPort) throw new Error('comm-worker must run as a worker thread');
const port = parentPort;

port.once('message', (msg: ToComm) => {
  let step = 0;
  let phase: Phase = 'setup';
  const { local, rank } = msg.device;
  const send = (m: FromComm) => port.postMessage(m);
  const control = new ControlBlock(
    msg.control,
    msg.config.topology.localDevices,
    MAX_GROUPS,
    threadWaitMs(msg.config.stallTimeoutMs, msg.config.topology.processes),
  );
  control.owner = { device: local, side: 'comm' };
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
  const arithmetic = getEngine(config.backend).arithmetic();
  const collective = openCollective(msg.collective, {
    timeoutMs: peerWaitMs(config.stallTimeoutMs),
    isAborted: () => control.aborted,
    heartbeat: () => control.beat(device, 'comm'),
    reducer: arithmetic,
  });
  try {
    await exchangeSteps(msg, control, at, collective, arithmetic);
    // No rank closes its connections while a peer may still be reading its last exchange (across hosts, a close with
    // data in flight can lose it): every rank of the communicator meets here first.
    if (!control.aborted) await collective.barrier();
  } finally {
    collective.close();
  }
}

/** The comm half of the pipeline: `wire` runs per unit sent (a group, or a chunk of one), `apply` per group once it is reduced. */
interface CommStages {
  wire(unit: GroupExchange): Promise<GroupExchange>;
  apply(unit: GroupExchange): Promise<GroupExchange>;
}

async function commStages(
  msg: ToComm,
  control: ControlBlock,
  at: (step: number, phase: Phase) => void,
  wire: CountingCollective,
  arithmetic: FlatArithmetic,
): Promise<CommStages> {
  const {
    device: { local: device, rank },
    config,
    buffers,
    groups,
  } = msg;
  const params = paramSlots(buffers),
    grads = gradSlots(buffers);
  const fi = config.faultInjection;
  const sharding = shardingCollective(msg, wire);
  const preimage = preimageStage(msg);
  // The all-reduce, or the run's hook in its place, or this device's shard of it; the emulated link.
  const hook = config.commHook;
  const wireStages: OperatorFunction<GroupExchange, GroupExchange>[] = [];
  if (preimage && sharding) wireStages.push(preimage); // before any device writes this replica's shard of the group
  wireStages.push(
    hook
      ? commHookGroup(await hookStates(msg, wire), wire, grads[device], groups)
      : sharding
        ? reduceScatterGroup(sharding, grads[device], groups)
        : allReduceGroup(wire, grads[device], groups),
  );
  if (config.link) wireStages.push(emulateLink(config.link, config.devices, groups));
  const stages: OperatorFunction<GroupExchange, GroupExchange>[] = [];
  stages.push(
    tap(unit => {
      // the update phase begins
      at(unit.step, 'update');
      if (fi && fi.device === rank && fi.step === unit.step && fi.phase === 'update' && fi.kind !== 'perturb')
        injectFault(fi.kind as InjectedFault, 'update');
    }),
  );
  if (preimage && !sharding) stages.push(preimage);
  stages.push(
    sharding
      ? applyShardUpdate(
          config.optimizer,
          localReplicas(msg),
          device,
          grads[device],
          () => sharding.barrier(),
          arithmetic,
        )
      : applyGroupUpdate(
          config.optimizer,
          params[device],
          grads[device],
          optimizerStateOf(buffers, device),
          groups,
          config.onNan === 'skip-step',
          arithmetic,
        ),
  );
  if (fi?.kind === 'perturb' && fi.device === rank) {
    // test fault: this replica differs after fi.step's update of group 0
    stages.push(
      tap(unit => {
        if (unit.step === fi.step && unit.group === 0) perturbParameter(params[device], groups[0].start);
      }),
    );
  }
  stages.push(publishApplied(control, device));
  const through = (ops: OperatorFunction<GroupExchange, GroupExchange>[]) => (unit: GroupExchange) =>
    lastValueFrom(ops.reduce((obs, op) => obs.pipe(op), of(unit)));
  return { wire: through(wireStages), apply: through(stages) };
}

/**
 * The collective to update by shards with (config.localUpdate 'shard', which config.ts resolves to 'replica' where it
 * does not apply: the comm threads of one process's devices read each other's slots in place), or undefined where
 * each device updates its own replica.
 */
function shardingCollective(msg: ToComm, wire: CountingCollective): ShardingCollective | undefined {
  return msg.config.localUpdate === 'shard' && wire.reduceScatterMean ? (wire as ShardingCollective) : undefined;
}

/** Every local device's parameters and optimizer state (the shard update writes each device's shard into all of them). */
function localReplicas(msg: ToComm): LocalReplicas {
  const { buffers, config } = msg;
  const params = paramSlots(buffers);
  return {
    params,
    states: Array.from({ length: config.topology.localDevices }, (_, d) => optimizerStateOf(buffers, d)),
  };
}

/** Device 0: what each update overwrites (parameters, optimizer state), for a checkpoint of an aborted run; others: none. */
function preimageStage(msg: ToComm): OperatorFunction<GroupExchange, GroupExchange> | undefined {
  const {
    device: { local: device },
    config,
    buffers,
    groups,
  } = msg;
  if (device !== 0 || !buffers.preimage) return undefined;
  const preimage = new StepPreimage(buffers.preimage, groups.length, buffers.total, buffers.stateSlots);
  const params = paramSlots(buffers)[device],
    state = optimizerStateOf(buffers, device);
  const everyGroup = config.exchange.order === 'priority'; // any group may complete the step
  return tap(unit =>
    preimage.save(unit.group, groups.length, groups[unit.group], unit.step, params, state, everyGroup),
  );
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
  const stages = await commStages(msg, control, at, wire, arithmetic);

  at(0, 'setup');
  for (let g = 0; g < groups.length; g++) {
    if (!control.waitGradsReady(device, g, 0, `device ${device}'s compute thread to build its model`)) return;
  }
  await collective.broadcast(params[device], 0, 0, buffers.total); // not counted: `wire` measures the gradient exchange
  if (buffers.stateTotal > 0) await collective.broadcast(modelStateSlots(buffers)[device], 0, 0, buffers.stateTotal); // non-trainable weights too
  // Parameters in place: as if step firstStep-1 had just been applied (0, or a resumed checkpoint's step).
  for (let g = 0; g < groups.length; g++) control.markApplied(device, g, msg.firstStep - 1);

  const exchange = config.exchange;
  switch (exchange.order) {
    case 'ready':
      return readyOrder(msg, control, at, stages, wire);
    case 'priority':
      return priorityOrder(msg, control, at, stages, wire, collective, exchange.chunkFloats);
    default: {
      const never: never = exchange;
      throw new Error(`unknown exchange order ${JSON.stringify(never)}`);
    }
  }
}

/** Injects the configured fault of the exchange phase, if this is its rank and step. */
function exchangeFault(msg: ToComm, step: number): void {
  const fi = msg.config.faultInjection;
  if (fi && fi.device === msg.device.rank && fi.step === step && fi.phase === 'exchange' && fi.kind !== 'perturb')
    injectFault(fi.kind as InjectedFault, 'exchange');
}

/** Reports a group's exchange to the main thread: its spans (wait, one exchange per unit sent, apply) and times. */
function reportExchanged(
  msg: ToComm,
  done: GroupExchange,
  sent: { start: number; end: number; label: string }[],
  wireFloats: number,
): void {
  const {
    device: { rank },
    groups,
  } = msg;
  const { step, group: g } = done;
  const name = groups[g].name;
  const span = (kind: Span['kind'], label: string, start: number, end: number): Span => ({
    device: rank,
    thread: 'comm',
    kind,
    name: label,
    step,
    group: g,
    start,
    end,
  });
  const spans = [
    span('wait', `wait ${name}`, done.waitStart, done.waitEnd),
    ...sent.map(s => span('exchange', `exchange ${name}${s.label}`, s.start, s.end)),
    span('apply', `apply ${name}`, done.applyStart!, done.applyEnd!),
  ];
  port.postMessage({
    type: 'exchanged',
    device: rank,
    step,
    group: g,
    waitMs: done.waitEnd - done.waitStart,
    exchangeMs: sent.reduce((ms, s) => ms + s.end - s.start, 0),
    updateMs: done.applyEnd! - done.applyStart!,
    spans,
    carried: { start: groups[g].start, end: groups[g].end },
    skipped: done.skipped === true,
    wireFloats,
  } satisfies FromComm);
}

/** Groups one after the other, in the order they become ready (transmission order). */
async function readyOrder(
  msg: ToComm,
  control: ControlBlock,
  at: (step: number, phase: Phase) => void,
  stages: CommStages,
  wire: CountingCollective,
): Promise<void> {
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
      exchangeFault(msg, step);
      const sent = await stages.wire({ step, group: g, waitStart, waitEnd: wallNow() });
      const done = await stages.apply(sent);
      reportExchanged(msg, done, [{ start: sent.exchangeStart!, end: sent.exchangeEnd!, label: '' }], wire.take());
    }
  }
}

/** The run's hook's states of every group: restored from a checkpoint, shared with the main thread when it checkpoints. */
async function hookStates(msg: ToComm, collective: Collective): Promise<HookStates> {
  const {
    config: { commHook, seed },
    groups,
    variables,
    hookState,
  } = msg;
  const states = new HookStates(
    await loadCommHook(commHook!.name, commHook!.module),
    commHook!.options,
    groups,
    variables,
    collective.rank,
    collective.size,
    seed,
  );
  if (hookState?.restore) states.restore(hookState.restore, hookState.source ?? 'checkpoint');
  if (hookState?.share)
    port.postMessage({ type: 'hookState', device: msg.device.rank, arrays: states.share() } satisfies FromComm);
  return states;
}

/**
 * Priority order (pipeline/priority-schedule.ts): groups in chunks; between chunks the highest-priority group every rank
 * has ready goes first. The agreement runs on the plain collective (not counted on `wire`: it is control, one float per rank).
 */
async function priorityOrder(
  msg: ToComm,
  control: ControlBlock,
  at: (step: number, phase: Phase) => void,
  stages: CommStages,
  wire: CountingCollective,
  collective: Collective,
  chunkFloats: number,
): Promise<void> {
  const {
    device: { local: device },
    config,
    groups,
  } = msg;
  // A hook exchanges whole groups (its state is per group): one chunk each, priorities still apply between groups.
  const chunks = groups.map(g => (config.commHook ? chunksOf(g, g.end - g.start) : chunksOf(g, chunkFloats)));
  const mine = new Float32Array(1),
    all = new Float32Array(collective.size);
  for (let step = msg.firstStep; step <= config.steps; step++) {
    at(step, 'exchange');
    const units = new Map<
      number,
      { unit: GroupExchange; sent: { start: number; end: number; label: string }[]; floats: number }
    >();
    const take = (g: number) => {
      // the group's first chunk: from here on its wait is over
      let u = units.get(g);
      if (!u) {
        const now = wallNow();
        u = { unit: { step, group: g, waitStart: now, waitEnd: now }, sent: [], floats: 0 };
        units.set(g, u);
        exchangeFault(msg, step);
      }
      return u;
    };
    const ok = await runPriorityStep(chunks, {
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
        u.sent.push({
          start: done.exchangeStart!,
          end: done.exchangeEnd!,
          label: chunk.count > 1 ? ` ${chunk.index + 1}/${chunk.count}` : '',
        });
        u.floats += wire.take();
      },
      finish: async g => {
        const u = take(g);
        reportExchanged(msg, await stages.apply(u.unit), u.sent, u.floats);
        at(step, 'exchange');
      },
    });
    if (!ok) return;
  }
}
