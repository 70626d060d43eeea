/**
 * Training configuration: the pure synchronous checks (config/check-config.ts), then the prepare phase that reads
 * modules, files and the dataset (config/prepare-config.ts). The shapes are in config-types.ts; each option is
 * declared once by the part that reads it (options/option-registry.ts lists them).
 */
import type { ResolvedConfig, TrainConfig } from './config-types.js';
import { loadPlugins } from './plugins/load-plugins.js';
import { refuseNonObject } from './config/known-keys.js';
import { pluginUrls } from './config/plugin-urls.js';
import { checkConfig } from './config/check-config.js';
import { prepareConfig } from './config/prepare-config.js';
export { checkConfig } from './config/check-config.js';
export { prepareConfig } from './config/prepare-config.js';
export type { CheckedConfig } from './config/checked-config.js';
export { METHODS, LOSS_KINDS } from './config-types.js';
export type { ClassifierConfig, LossKind, Method, ResolvedConfig, TrainConfig } from './config-types.js';

/**
 * Validates everything that can be checked before threads start, and resolves defaults. The plugins load first
 * (they register transports, methods, engines, hooks and options, which the checks then know), then the
 * synchronous checks, then the prepare phase.
 */
export async function resolveConfig(config: TrainConfig): Promise<ResolvedConfig> {
  refuseNonObject(config);
  await loadPlugins(pluginUrls(config.plugins));
  return prepareConfig(checkConfig(config));
}
