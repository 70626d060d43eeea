// applyShardUpdate: a device updates its shard of a group once and writes it into every replica. Computed two ways:
// each of 2–3 devices applying its shard (shardOf) in turn, against applyGroupUpdate on every replica in full; the
// parameters and optimizer state of every replica must be the same bits, for SGD, SGD with momentum and Adam over
// two steps. The barrier is awaited once per unit, after the copies; a unit without a shard is an error.
import t from 'tap';
import { Subject, firstValueFrom, of } from 'rxjs';
import { applyShardUpdate, type LocalReplicas } from '../../src/pipeline/operators/apply-shard-update.js';
import { applyGroupUpdate } from '../../src/pipeline/operators/apply-group-update.js';
import { shardOf } from '../../src/collectives/reduce-slots.js';
import { optimizerStateSlots, type OptimizerConfig } from '../../src/optim/flat-optimizer.js';
import type { ParameterGroup } from '../../src/model/parameter-layout.js';
import type { GroupExchange } from '../../src/pipeline/events.js';

const N = 23;
const groups: ParameterGroup[] = [
  { name: 'fc', start: 0, end: 14 },
  { name: 'conv', start: 14, end: N },
];
const unit = (step: number, group: number, shard?: [number, number]): GroupExchange => ({
  step,
  group,
  waitStart: 1,
  waitEnd: 2,
  shard,
});

function values(seed: number, scale: number): Float32Array {
  const a = new Float32Array(new SharedArrayBuffer(N * 4));
  for (let i = 0; i < N; i++) a[i] = Math.sin(seed * 13.7 + i * 1.9) * scale;
  return a;
}

/** `devices` replicas of the same parameters, with zeroed state. */
function replicas(devices: number, slots: number): LocalReplicas {
  return {
    params: Array.from({ length: devices }, () => values(1, 1)),
    states: Array.from({ length: devices }, () => Array.from({ length: slots }, () => values(0, 0))),
  };
}

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');

const OPTIMIZERS: OptimizerConfig[] = [
  { kind: 'sgd', lr: 0.1, momentum: 0 },
  { kind: 'sgd', lr: 0.05, momentum: 0.9 },
  { kind: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 },
  { kind: 'rmsprop', lr: 0.01, decay: 0.9, momentum: 0.5, epsilon: 1e-7, centered: true },
  { kind: 'adagrad', lr: 0.05, initialAccumulatorValue: 0.1 },
  { kind: 'adamax', lr: 0.01, beta1: 0.9, beta2: 0.999, epsilon: 1e-7, decay: 0.1 },
  { kind: 'adadelta', lr: 1, rho: 0.95, epsilon: 1e-7 },
];

for (const optimizer of OPTIMIZERS) {
  for (const devices of [2, 3]) {
    t.test(
      `${optimizer.kind}${optimizer.kind === 'sgd' ? ` momentum ${optimizer.momentum}` : ''}, ${devices} devices: ` +
        `shards written into every replica = each replica updated in full`,
      async t => {
        const slots = optimizerStateSlots(optimizer);
        const sharded = replicas(devices, slots),
          full = replicas(devices, slots);
        let barriers = 0;
        for (const step of [1, 2]) {
          const grads = values(step + 7, 0.3); // the averaged gradient of the step, as every device's shard holds it
          for (const g of [0, 1]) {
            for (let d = 0; d < devices; d++) {
              const shard = shardOf(groups[g].start, groups[g].end, d, devices);
              await firstValueFrom(
                of(unit(step, g, shard)).pipe(
                  applyShardUpdate(optimizer, sharded, d, grads, async () => {
                    barriers++;
                  }),
                ),
              );
            }
            for (let d = 0; d < devices; d++) {
              const source = new Subject<GroupExchange>();
              source.pipe(applyGroupUpdate(optimizer, full.params[d], grads, full.states[d], groups)).subscribe();
              source.next(unit(step, g));
            }
          }
        }
        for (let d = 0; d < devices; d++) {
          t.equal(bits(sharded.params[d]), bits(full.params[d]), `replica ${d}: the parameters' bits`);
          sharded.states[d].forEach((s, k) =>
            t.equal(bits(s), bits(full.states[d][k]), `replica ${d}: state ${k}'s bits`),
          );
        }
        t.not(bits(sharded.params[0]), bits(values(1, 1)), 'the parameters moved');
        t.equal(barriers, 2 * 2 * devices, 'one barrier per unit');
      },
    );
  }
}

t.test('a unit without a shard is an error naming its step and group', async t => {
  const r = replicas(2, 0);
  await t.rejects(
    firstValueFrom(of(unit(3, 1)).pipe(applyShardUpdate(OPTIMIZERS[0], r, 0, values(2, 1), async () => {}))),
    /step 3 group 1 carries no shard/,
  );
});
