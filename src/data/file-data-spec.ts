/**
 * What a worker needs to read a data file tandem reads itself (an image folder, a CSV), beside the dataset's source:
 * serialisable, and carrying a stamp of the data the main thread checked, so a thread that finds the data changed
 * since says so instead of training on other samples.
 */

/** `--data DIR`: one subfolder per class, images resized to `imageShape`, decoded once into a cache file. */
export interface ImageFolderSpec {
  kind: 'image-folder';
  /** Absolute path of the folder. */
  dir: string;
  /** [height, width, channels]; channels 1 (grey), 3 (RGB) or 4 (RGBA). */
  imageShape: [number, number, number];
  /** Absolute path of the cache directory (`--data-cache`, default DIR/.tandem-cache). */
  cacheDir: string;
  /** The SHA-1 of the cache's manifest the main thread built or found (image-cache.ts). */
  stamp: string;
}

/** `--data FILE.csv --label-column NAME`: one sample a row, the features the chosen columns. */
export interface CsvSpec {
  kind: 'csv';
  /** Absolute path of the CSV file. */
  file: string;
  labelColumn: string;
  /** The feature columns, in this order; absent: every column but the label's, in the file's order. */
  featureColumns?: string[];
  /** 'class': labels are classes (sorted values); 'target': a regression's float target. */
  label: 'class' | 'target';
  /** The file's size and modification time when the main thread read it. */
  stamp: string;
}

export type FileDataSpec = ImageFolderSpec | CsvSpec;
