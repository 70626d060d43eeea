/**
 * The pure, synchronous checks of a train config: the keys, every option's own check (from its declaration), then
 * the rules between options, resolving what needs nothing but the config. Plugins must be loaded first (the names
 * they register, and the options they declare, are checked here): `resolveConfig` loads them, then calls this.
 * It reads no module and no dataset; the defaults it resolves may look at the machine (the backend the addon
 * allows, the cores for the loader threads).
 */
import { dataParallelMethod } from './data-parallel-method.js';
import os from 'node:os';
import { TandemError } from '../errors.js';
import { bad } from '../config-checks.js';
import type { TrainConfig } from '../config-types.js';
import { BACKENDS } from '../engine/engine-options.js';
import { assertBackendAvailable, assertPrecisionAvailable, defaultBackend } from '../engine/backend.js';
import { PRECISIONS, type Precision } from '../engine/engine-options.js';
import { engineNames, getEngine } from '../engine/engine-registry.js';
import { oneOf } from '../config-checks.js';
import { worldSize } from '../world/topology.js';
import { resolveHosts } from '../world/resolve-hosts.js';
import { DEFAULT_DEVICES } from '../world/world-options.js';
import { DEFAULT_REPLICA_CHECK_EVERY } from '../monitor/reliability-options.js';
import { refuseNonObject, refuseOtherPartsOptions, refuseUnknownKeys } from './known-keys.js';
import { checkDeclared } from './declared-checks.js';
import { defaultLoaderThreads } from '../data/data-options.js';
import { pluginUrls } from './plugin-urls.js';
import { checkpointFields } from './check-reliability.js';
import { pluginValues } from './known-keys.js';
import { scheduleFields, transportOf } from './check-schedule.js';
import { dataSourceOf, modelSourceOf } from './check-sources.js';
import type { CheckedConfig, CheckedFields } from './checked-config.js';

export function checkConfig(config: TrainConfig): CheckedConfig {
  refuseNonObject(config);
  const plugins = pluginUrls(config.plugins);
  refuseUnknownKeys(config);
  checkDeclared(config);
  const localDevices = config.devices ?? DEFAULT_DEVICES;
  const { topology, rendezvous } = resolveHosts(config, localDevices);
  const devices = worldSize(topology); // replicas in the job: batch split, labels, mean
  const writer = topology.process === 0; // host 0 alone writes the model, summary, trace and checkpoints
  const backend = backendOf(config);
  const batch = batchOf(config, devices, topology.processes);
  const accumulate = accumulateOf(config, batch, devices);
  const seed = config.seed ?? 1;
  const schedule = scheduleFields(config, devices);
  const transport = transportOf(config, topology, rendezvous);
  refuseOtherPartsOptions(config, { method: config.method ?? 'data-parallel', transport, backend });
  if (config.commHook === 'auto' && config.strategy !== 'auto')
    bad('commHook', "'auto' (let --strategy auto pick a hook) needs strategy 'auto'");
  const fields: CheckedFields = {
    topology,
    rendezvous,
    devices,
    backend,
    ...nativeFields(config, backend),
    precision: precisionOf(config, backend),
    batch,
    accumulate,
    seed,
    ...schedule,
    trace: writer ? config.trace : undefined,
    allReduce: config.allReduce ?? 'sharded',
    localUpdate: config.localUpdate ?? 'replica',
    transport,
    batchNorm: config.batchNorm ?? 'sync',
    forwardWait: config.forwardWait ?? 'group',
    plugins,
    out: writer ? config.out : undefined,
    overwrite: config.overwrite,
    stallTimeoutMs: config.stallTimeoutMs ?? 120_000,
    loaderThreads: config.loaderThreads ?? defaultLoaderThreads(os.availableParallelism()),
    pluginOptions: pluginValues(config),
    onNan: config.onNan ?? 'error',
    replicaCheckEvery: config.replicaCheckEvery ?? DEFAULT_REPLICA_CHECK_EVERY,
    ...checkpointFields(config, writer),
  };
  const model = modelSourceOf(config);
  const data = dataSourceOf(config);
  refuseUnpaired(config);
  return { config, fields, localDevices, writer, ...model, ...data };
}

/** Options that need another: steps and epochs exclude each other; a dashboard address needs a dashboard. */
function refuseUnpaired(config: TrainConfig): void {
  if (config.steps !== undefined && config.epochs !== undefined) bad('steps', 'give steps or epochs, not both');
  if (config.dashboardHost !== undefined && config.dashboard === undefined)
    bad(
      'dashboardHost',
      'is where the dashboard listens, and no dashboard was asked for: add --dashboard [PORT], or remove ' +
        '--dashboard-host',
    );
}

/**
 * The native engine's own options; another built-in engine has neither (a plugin's engine may read them), and one
 * given with it would be ignored unsaid.
 */
function nativeFields(config: TrainConfig, backend: string): Pick<CheckedFields, 'nativeThreads' | 'nativeFusion'> {
  const other = backend !== 'native' && (BACKENDS as readonly string[]).includes(backend);
  for (const [field, flag] of [
    ['nativeThreads', '--native-threads'],
    ['nativeFusion', '--no-native-fusion'],
  ] as const) {
    if (other && config[field] !== undefined)
      bad(field, `applies to backend 'native' only, not '${backend}': give --backend native, or remove ${flag}`);
  }
  return { nativeThreads: config.nativeThreads ?? 1, nativeFusion: config.nativeFusion ?? true };
}

/** The precision named (default fp32), refused before any thread starts when the backend cannot multiply in it. */
function precisionOf(config: TrainConfig, backend: string): Precision {
  const precision = oneOf('precision', config.precision ?? 'fp32', PRECISIONS);
  assertPrecisionAvailable(backend, precision);
  return precision;
}

/**
 * The global batch: a multiple of the world's devices, or with partialBatch split over them as evenly as it can be;
 * never fewer samples than devices (a device with no sample of a full batch would run a placeholder row each step,
 * which BatchNormalization's statistics count).
 */
function batchOf(config: TrainConfig, devices: number, hosts: number): number {
  const batch = config.batch ?? 32;
  if (batch % devices !== 0 && config.partialBatch !== true) {
    const world = hosts > 1 ? ` (${hosts} hosts × ${devices / hosts})` : '';
    bad(
      'batch',
      `global batch ${batch} must be divisible by devices ${devices}${world} (each device trains batch/devices ` +
        `samples); try ${Math.max(devices, batch - (batch % devices))}, or set partialBatch (--partial-batch), ` +
        'which splits every batch over the devices as evenly as it can (fit and fitDataset set it)',
    );
  }
  if (batch < devices)
    bad(
      'batch',
      `global batch ${batch} is smaller than devices ${devices}; give a batch of at least ${devices}, or fewer devices`,
    );
  return batch;
}

/** Micro-batches per step: the global batch splits into devices × accumulate equal micro-batches. */
function accumulateOf(config: TrainConfig, batch: number, devices: number): number {
  const n = config.accumulate ?? 1;
  if (n > 1 && !dataParallelMethod(config.method ?? 'data-parallel'))
    bad('accumulate', `applies to method data-parallel only, not ${config.method}: remove accumulate`);
  if (n > 1 && batch % (devices * n) !== 0)
    bad(
      'accumulate',
      `global batch ${batch} must be divisible by devices ${devices} × accumulate ${n} = ${devices * n} (each ` +
        `device trains ${n} micro-batches of batch / (devices × accumulate) samples); give a batch that is a ` +
        `multiple of ${devices * n}, or another accumulate`,
    );
  return n;
}

/** The backend named (or the default), registered, available here, and one that keeps parameters in host memory. */
function backendOf(config: TrainConfig): string {
  const backend = oneOf('backend', config.backend ?? defaultBackend(), engineNames());
  assertBackendAvailable(backend);
  if (getEngine(backend).capabilities.parameters !== 'host') {
    throw new TandemError(
      'BACKEND_UNAVAILABLE',
      `backend '${backend}' keeps parameters on the device, ` +
        "and tandem's device threads hand parameters and gradients over in host memory; " +
        'use native, wasm, cpu or webgpu',
    );
  }
  return backend;
}
