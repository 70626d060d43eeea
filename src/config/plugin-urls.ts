/** The `plugins` of a config, as the file: URLs every thread loads. */
import { bad } from '../config-checks.js';
import { resolveModuleUrl } from '../data/resolve-dataset.js';

export function pluginUrls(plugins: unknown): string[] {
  if (plugins === undefined) return [];
  if (!Array.isArray(plugins) || plugins.some(p => typeof p !== 'string' || p === ''))
    bad('plugins', 'must be a list of ES module paths');
  return (plugins as string[]).map(p => resolveModuleUrl(p, 'plugins'));
}
