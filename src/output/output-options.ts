/** The output section of a train config: where the model, summary and trace are written (host 0 alone). */
import type { OptionTable } from '../options/declaration.js';
import { nonEmpty } from '../options/option-checks.js';

export interface OutputOptions {
  /** Directory for model.json + weights.bin + summary.json. */
  out?: string;
  /** Write a Chrome trace (Perfetto / chrome://tracing) of the run here. */
  trace?: string;
  /** Replace a finished run's results in `out` (its summary.json there); without it such an `out` is refused. */
  overwrite?: boolean;
}

export const OUTPUT_OPTIONS: OptionTable<OutputOptions> = {
  out: {
    kind: 'string',
    group: 'output',
    hosts: 'own: host 0 alone writes --out',
    arg: 'DIR',
    doc: 'model.json + weights.bin + summary.json (host 0 writes them)',
    check: nonEmpty('must be a directory path'),
  },
  trace: {
    kind: 'string',
    group: 'output',
    hosts: "own: a file of this host's own",
    arg: 'FILE.json',
    doc: 'a Chrome trace of the run (Perfetto / chrome://tracing)',
    check: nonEmpty('must be a file path'),
  },
  overwrite: {
    kind: 'boolean',
    group: 'output',
    hosts: 'own: host 0 alone writes --out',
    doc: "replace a finished run's results in --out (refused without it, unless the run resumes)",
  },
};
