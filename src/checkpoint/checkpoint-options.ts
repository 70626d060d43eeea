/** The checkpoint section of a train config: when and where checkpoints are written, and what a run resumes. */
import type { OptionTable } from '../options/declaration.js';
import { nonEmpty, nonNegativeInt, positiveInt } from '../options/option-checks.js';

export interface CheckpointOptions {
  /** Write a checkpoint every K steps (and when stopped). */
  checkpointEvery?: number;
  /** Where checkpoints go. Default: `out`. */
  checkpointDir?: string;
  /**
   * Keep only the K newest checkpoints of the checkpoint directory (older ones are removed after each write).
   * Default 3; 0 keeps all.
   */
  keepCheckpoints?: number;
  /**
   * Continue from the latest checkpoint in this directory (or this checkpoint file). `steps` counts from the start
   * of the run.
   */
  resume?: string;
}

export const CHECKPOINT_OPTIONS: OptionTable<CheckpointOptions> = {
  checkpointEvery: {
    kind: 'integer',
    group: 'checkpoint',
    hosts: 'same',
    arg: 'K',
    doc: 'write a checkpoint every K steps (and when stopped)',
    check: positiveInt(),
  },
  checkpointDir: {
    kind: 'string',
    group: 'checkpoint',
    hosts: 'own: a directory on this machine (host 0 writes the checkpoints)',
    arg: 'DIR',
    default: '--out',
    doc: 'where checkpoints go',
    check: nonEmpty('must be a path'),
  },
  keepCheckpoints: {
    kind: 'integer',
    group: 'checkpoint',
    hosts: 'own: host 0 alone writes and prunes the checkpoints',
    arg: 'K',
    default: '3 (0 keeps all)',
    doc: 'the K newest checkpoints are kept',
    check: nonNegativeInt('0 keeps every checkpoint'),
  },
  resume: {
    kind: 'string',
    group: 'checkpoint',
    hosts: 'same',
    arg: 'DIR|FILE',
    doc: 'continue from the latest checkpoint there; --steps counts from the start of the run',
    check: nonEmpty('must be a path'),
  },
};
