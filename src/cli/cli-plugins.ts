/**
 * The plugins a command line names (`--plugin MODULE`, and a `--config` file's `plugins`), loaded before its flags
 * are parsed or its help is written: the options they declare are then flags, and in `--help`.
 */
import { loadPlugins } from '../plugins/load-plugins.js';
import { pluginUrls } from '../config/plugin-urls.js';
import { readConfigFile } from './read-config-file.js';

function flagValues(argv: readonly string[], flag: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === `--${flag}` && i + 1 < argv.length) out.push(argv[++i]);
    else if (argv[i].startsWith(`--${flag}=`)) out.push(argv[i].slice(flag.length + 3));
  }
  return out;
}

/** The modules, as paths; a bad --config is left for the parser to report. */
export function pluginArgs(argv: readonly string[]): string[] {
  const fromFile = flagValues(argv, 'config').flatMap(file => {
    try {
      const plugins = readConfigFile(file).plugins;
      return Array.isArray(plugins) ? plugins.filter((p): p is string => typeof p === 'string' && p !== '') : [];
    } catch {
      return [];
    }
  });
  return [...fromFile, ...flagValues(argv, 'plugin').filter(p => p !== '')];
}

export async function loadCliPlugins(argv: readonly string[]): Promise<void> {
  await loadPlugins(pluginUrls(pluginArgs(argv)));
}
