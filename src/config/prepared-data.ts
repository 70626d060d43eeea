/** What the prepare phase found about the data: its spec, its shape and classes, and what the checks read next. */
import type { Dataset, DatasetSpec } from '../data/dataset.js';

export interface PreparedData {
  data: DatasetSpec;
  meta: { size: number; sampleShape: readonly number[]; classes: number; targetShape?: readonly number[] };
  /** A data module's sample 0: its label or target. */
  firstLabel?: number;
  userDataset?: Dataset;
  /** The classes' names, when the dataset gives them (an image folder, a CSV): written to labels.json. */
  classNames?: readonly string[];
  /** What the run says of the data once, as warnings (an image folder's files left out, classes that are splits). */
  dataWarnings?: string[];
}
