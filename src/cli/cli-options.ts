/** The flags of `tandem train` (and `profile`) that are not train options: how the command reads and prints. */
import type { OptionTable } from '../options/declaration.js';

/**
 * verbose: a host other than 0 shows its own progress too (by default host 0 shows the world's; the others only
 * warnings, errors and their final line).
 */
export interface CliFlags {
  config?: string;
  json?: boolean;
  quiet?: boolean;
  verbose?: boolean;
}

export const CLI_FLAGS: OptionTable<CliFlags> = {
  config: {
    kind: 'string',
    group: 'general',
    hosts: 'own: a file path; the options it gives are compared one by one',
    arg: 'FILE.json',
    doc: 'a JSON object of train options (camelCase keys); flags given beside it win',
  },
  json: {
    kind: 'boolean',
    group: 'general',
    hosts: 'own: how this host prints',
    doc: 'one JSON event per line instead of text',
  },
  quiet: {
    kind: 'boolean',
    group: 'general',
    hosts: 'own: how this host prints',
    doc: 'no progress, only warnings, errors and the final lines',
  },
  verbose: {
    kind: 'boolean',
    group: 'general',
    hosts: 'own: how this host prints',
    doc: 'a host other than 0 shows its own progress too',
  },
};
