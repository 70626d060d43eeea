/** The plugin section of a train config: the modules every thread loads first. */
import type { OptionTable } from '../options/declaration.js';

export interface PluginOptions {
  /**
   * ES modules (paths) loaded in every thread of the run before anything else: each registers what it
   * brings — a transport (`registerTransport`), a method (`registerMethod`), an engine (`registerEngine`).
   */
  plugins?: string[];
}

export const PLUGIN_OPTIONS: OptionTable<PluginOptions> = {
  plugins: {
    kind: 'list',
    group: 'plugin',
    hosts: 'own: module paths may differ between machines; the options they declare are compared',
    flag: 'plugin',
    arg: 'MODULE',
    doc: 'a module that registers a transport, method, engine or hook (repeatable; loaded first)',
  },
};
