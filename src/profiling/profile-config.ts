/** The profiler thread's slice of a run's configuration. */
import type { ResolvedConfig } from '../config-types.js';

/** What the profiler's thread receives of the run's configuration: the model, its engine and one device's batch. */
export type ProfileConfig = Pick<
  ResolvedConfig,
  | 'plugins'
  | 'pluginOptions'
  | 'backend'
  | 'nativeThreads'
  | 'nativeFusion'
  | 'precision'
  | 'model'
  | 'optimizer'
  | 'perDevice'
  | 'sampleShape'
>;

/** The profiler thread's slice of `cfg`. */
export function profileSlice(c: ResolvedConfig): ProfileConfig {
  const { plugins, pluginOptions, backend, nativeThreads, nativeFusion, precision, model, optimizer } = c;
  const { perDevice, sampleShape } = c;
  const engine = { backend, nativeThreads, nativeFusion, precision };
  return { plugins, pluginOptions, ...engine, model, optimizer, perDevice, sampleShape };
}
