/**
 * The model this run's devices would build, as the flags hosts compare (world/host-flags.ts's modelFlags), built on a
 * thread of its own (model-flags-worker.ts) before any device starts: what a restarted host of an elastic run shows
 * host 0 when it asks to be admitted, so that a model path giving another model here is refused at once, not admitted
 * into a generation whose model agreement would end the whole run.
 */
import { runOneShotWorker } from '../actors/one-shot-worker.js';
import type { ResolvedConfig } from '../config-types.js';
import type { HostFlags } from '../world/host-flags.js';
import type { ModelFlagsConfig, ModelFlagsReply } from './model-flags-worker.js';

export async function builtModelFlags(cfg: ResolvedConfig): Promise<HostFlags> {
  const { model, backend, nativeFusion, nativeThreads, precision, pluginOptions, plugins } = cfg;
  const config: ModelFlagsConfig = { model, backend, nativeFusion, nativeThreads, precision, pluginOptions, plugins };
  const reply = await runOneShotWorker<Extract<ModelFlagsReply, { type: 'flags' }>>(
    new URL('./model-flags-worker.js', import.meta.url),
    config,
    'model check',
  );
  return reply.flags;
}
