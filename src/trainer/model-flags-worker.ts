/**
 * A one-shot thread (model-flags.ts): builds the model a device of this run would build, on the run's engine, and
 * answers with it as the flags hosts compare (world/host-flags.ts's modelFlags): its parameters, tensors and layers.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as tf from '#tfjs';
import { serializeError } from '../errors.js';
import { engineStartOptions, startBackend } from '../engine/backend.js';
import { buildTrainingModel } from '../model/resolve-model.js';
import { layoutParameters, weightShapes } from '../model/parameter-layout.js';
import { layerSettings } from '../model/layer-settings.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { modelFlags, type HostFlags } from '../world/host-flags.js';
import type { ResolvedConfig } from '../config-types.js';

/** What the thread needs of the run's configuration: the model, its engine, the plugins that may define it. */
export type ModelFlagsConfig = Pick<
  ResolvedConfig,
  'model' | 'backend' | 'nativeFusion' | 'nativeThreads' | 'precision' | 'pluginOptions' | 'plugins'
>;
export type ModelFlagsReply =
  { type: 'flags'; flags: HostFlags } | { type: 'error'; error: ReturnType<typeof serializeError> };

const port = parentPort!;
flagsOf(workerData as ModelFlagsConfig).then(
  flags => port.postMessage({ type: 'flags', flags } satisfies ModelFlagsReply),
  err => port.postMessage({ type: 'error', error: serializeError(err) } satisfies ModelFlagsReply),
);

async function flagsOf(config: ModelFlagsConfig): Promise<HostFlags> {
  await loadPlugins(config.plugins);
  await startBackend(tf, config.backend, engineStartOptions(config));
  const model = await buildTrainingModel(tf, config);
  const weights = weightShapes(model.trainableWeights);
  const flags = modelFlags({ weights, layout: layoutParameters(weights), layers: layerSettings(model) });
  model.dispose();
  return flags;
}
