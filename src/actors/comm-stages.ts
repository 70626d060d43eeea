/**
 * The comm half of a device's gradient pipeline, as stages: per unit sent (a group, or a chunk of one) the all-reduce
 * mean of its gradients through the run's transport (or the run's communication hook in its place, or, with
 * `localUpdate: 'shard'`, a reduce-scatter), the emulated link if any; per group once it is reduced the optimizer
 * update of this device's parameters (or of its shard, written into every replica of the process), publish "applied".
 */
import { lastValueFrom, of, tap, type OperatorFunction } from '#rxjs';
import { allReduceGroup } from '../pipeline/operators/all-reduce-group.js';
import { commHookGroup } from '../pipeline/operators/comm-hook-group.js';
import { loadCommHook } from '../pipeline/comm-hooks.js';
import { HookStates } from '../pipeline/hook-states.js';
import type { CountingCollective } from '../pipeline/counting-collective.js';
import { emulateLink } from '../pipeline/operators/emulate-link.js';
import { applyGroupUpdate } from '../pipeline/operators/apply-group-update.js';
import { applyShardUpdate, type LocalReplicas } from '../pipeline/operators/apply-shard-update.js';
import { reduceScatterGroup, type ShardingCollective } from '../pipeline/operators/reduce-scatter-group.js';
import { publishApplied } from '../pipeline/operators/publish-applied.js';
import { mirrorParamsBf16 } from '../pipeline/operators/mirror-params-bf16.js';
import type { GroupExchange } from '../pipeline/events.js';
import type { ControlBlock, Phase } from '../pipeline/control-block.js';
import type { Collective } from '../collectives/collective.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';
import { probeEnter, probeUpdated, probesUpdates } from '../plugins/step-probes.js';
import { StepPreimage } from './step-preimage.js';
import { gradSlots, optimizerStateOf, paramSlots, paramsBf16Of } from './shared-buffers.js';
import type { FromComm, ToComm } from './protocol.js';
import type { CommConfig } from './config-slices.js';

/** What a device's update stages read: its identity, buffers and groups, and the optimizer's settings. */
export type ApplySource = Pick<ToComm, 'device' | 'buffers' | 'groups'> & {
  config: Pick<CommConfig, 'optimizer' | 'onNan' | 'pluginOptions'>;
};

/**
 * The comm half of the pipeline: `wire` runs per unit sent (a group, or a chunk of one), `apply` per group once it is
 * reduced.
 */
export interface CommStages {
  wire(unit: GroupExchange): Promise<GroupExchange>;
  apply(unit: GroupExchange): Promise<GroupExchange>;
}

/** The comm half of the pipeline of device `msg.device` (`report`: a message to the main thread). */
export async function commStages(
  msg: ToComm,
  control: ControlBlock,
  at: (step: number, phase: Phase) => void,
  wire: CountingCollective,
  arithmetic: FlatArithmetic,
  report: (m: FromComm) => void,
): Promise<CommStages> {
  const sharding = shardingCollective(msg, wire);
  // priority: any group may complete the step; elastic: a completed step may have to be rolled back
  const preimage = preimageStage(
    msg,
    msg.config.exchange.order === 'priority' || msg.buffers.preimageEveryGroup === true,
  );
  const wireStages = await wireStagesOf(msg, wire, sharding, preimage, report);
  const stages = applyStagesOf(msg, control, at, sharding, preimage, arithmetic);
  return { wire: through(wireStages), apply: through(stages) };
}

/** The stages `ops` as one function of a unit. */
function through(ops: OperatorFunction<GroupExchange, GroupExchange>[]) {
  return (unit: GroupExchange) => lastValueFrom(ops.reduce((obs, op) => obs.pipe(op), of(unit)));
}

/**
 * A device's own update of a group, without an exchange (a world of one device, actors/inline-update.ts): the update
 * phase, the pre-update copy, the optimizer update, the bf16 copy, "applied".
 */
export function updateStages(
  source: ApplySource,
  control: ControlBlock,
  at: (step: number, phase: Phase) => void,
  arithmetic: FlatArithmetic,
): (unit: GroupExchange) => Promise<GroupExchange> {
  const preimage = preimageStage(source, source.buffers.preimageEveryGroup === true);
  return through(applyStagesOf(source, control, at, undefined, preimage, arithmetic));
}

/** The all-reduce, or the run's hook in its place, or this device's shard of it; the emulated link. */
async function wireStagesOf(
  msg: ToComm,
  wire: CountingCollective,
  sharding: ShardingCollective | undefined,
  preimage: OperatorFunction<GroupExchange, GroupExchange> | undefined,
  report: (m: FromComm) => void,
): Promise<OperatorFunction<GroupExchange, GroupExchange>[]> {
  const { config, groups } = msg;
  const grads = gradSlots(msg.buffers)[msg.device.local];
  const wireStages: OperatorFunction<GroupExchange, GroupExchange>[] = [];
  if (preimage && sharding) wireStages.push(preimage); // before any device writes this replica's shard of the group
  wireStages.push(
    config.commHook
      ? commHookGroup(await hookStates(msg, wire, report), wire, grads, groups)
      : sharding
        ? reduceScatterGroup(sharding, grads, groups)
        : allReduceGroup(wire, grads, groups),
  );
  if (config.link) wireStages.push(emulateLink(config.link, config.devices, groups));
  return wireStages;
}

/**
 * Per group once it is reduced: the update phase, the optimizer update (of this replica or of this shard), "applied".
 */
function applyStagesOf(
  msg: ApplySource,
  control: ControlBlock,
  at: (step: number, phase: Phase) => void,
  sharding: ShardingCollective | undefined,
  preimage: OperatorFunction<GroupExchange, GroupExchange> | undefined,
  arithmetic: FlatArithmetic,
): OperatorFunction<GroupExchange, GroupExchange>[] {
  const {
    device: { local: device, rank },
    config,
    buffers,
    groups,
  } = msg;
  const params = paramSlots(buffers),
    grads = gradSlots(buffers);
  const values = config.pluginOptions;
  const stages: OperatorFunction<GroupExchange, GroupExchange>[] = [];
  stages.push(
    tap(unit => {
      // the update phase begins
      at(unit.step, 'update');
      probeEnter({ thread: 'comm', phase: 'update', device: rank, step: unit.step }, values);
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
  if (probesUpdates()) {
    // a probe sees (and may change: tandem's tests make one replica differ) the parameters after each group's update
    stages.push(
      tap(unit => {
        const at = { thread: 'comm' as const, phase: 'update', device: rank, step: unit.step, group: unit.group };
        probeUpdated(at, values, params[device], groups[unit.group].start);
      }),
    );
  }
  const mirror = sharding ? undefined : mirrorStage(msg, params[device], arithmetic);
  if (mirror) stages.push(mirror);
  stages.push(publishApplied(control, device));
  return stages;
}

/**
 * The collective to update by shards with (config.localUpdate 'shard', which config.ts resolves to 'replica' where it
 * does not apply: the comm threads of one process's devices read each other's slots in place), or undefined where
 * each device updates its own replica.
 */
function shardingCollective(msg: ToComm, wire: CountingCollective): ShardingCollective | undefined {
  return msg.config.localUpdate === 'shard' && wire.reduceScatterMean ? (wire as ShardingCollective) : undefined;
}

/**
 * Every local device's parameters and optimizer state (the shard update writes each device's shard into all of them).
 */
function localReplicas({ buffers }: ApplySource): LocalReplicas {
  return {
    params: paramSlots(buffers),
    states: Array.from({ length: buffers.devices }, (_, d) => optimizerStateOf(buffers, d)),
  };
}

/**
 * Precision bf16: the updated group's bf16 copy for the device's next passes (after any probe changed the values), when
 * the run keeps one.
 */
function mirrorStage(msg: ApplySource, params: Float32Array, arithmetic: FlatArithmetic) {
  const copy = paramsBf16Of(msg.buffers, msg.device.local, msg.groups.length);
  if (!copy || !arithmetic.castToBf16) return undefined;
  return mirrorParamsBf16(params, copy, msg.groups, arithmetic.castToBf16.bind(arithmetic));
}

/**
 * Device 0: what each update overwrites (parameters, optimizer state), for a checkpoint of an aborted run; others:
 * none.
 */
function preimageStage(
  msg: ApplySource,
  everyGroup: boolean,
): OperatorFunction<GroupExchange, GroupExchange> | undefined {
  const {
    device: { local: device },
    buffers,
    groups,
  } = msg;
  if (device !== 0 || !buffers.preimage) return undefined;
  const preimage = new StepPreimage(buffers.preimage, groups.length, buffers.total, buffers.stateSlots);
  const params = paramSlots(buffers)[device],
    state = optimizerStateOf(buffers, device);
  return tap(unit =>
    preimage.save(unit.group, groups.length, groups[unit.group], unit.step, params, state, everyGroup),
  );
}

/**
 * The run's hook's states of every group: restored from a checkpoint, shared with the main thread when it checkpoints.
 */
async function hookStates(msg: ToComm, collective: Collective, report: (m: FromComm) => void): Promise<HookStates> {
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
  if (hookState?.share) report({ type: 'hookState', device: msg.device.rank, arrays: states.share() });
  return states;
}
