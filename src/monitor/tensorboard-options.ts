/** The tensorboard section of a train config: where host 0 writes TensorBoard event files of the run. */
import type { OptionTable } from '../options/declaration.js';
import { nonEmpty } from '../options/option-checks.js';

export interface TensorBoardOptions {
  /**
   * Write TensorBoard event files here (`DIR/train/events.out.tfevents.*`; host 0 writes them): per step loss,
   * accuracy, samples/s, step time and each device's compute and exchange time; per epoch the mean loss and
   * accuracy. Open them with `tensorboard --logdir DIR`.
   */
  tensorboard?: string;
}

export const TENSORBOARD_OPTIONS: OptionTable<TensorBoardOptions> = {
  tensorboard: {
    kind: 'string',
    group: 'output',
    hosts: 'own: host 0 alone writes the event files',
    arg: 'DIR',
    doc: 'TensorBoard event files of the run in DIR/train (host 0 writes them; tensorboard --logdir DIR)',
    check: nonEmpty('must be a directory path'),
  },
};
