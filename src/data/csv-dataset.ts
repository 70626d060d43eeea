/**
 * `--data FILE.csv --label-column NAME`: a CSV file (a header row, then one sample a row; parsed by csv-parse, so
 * quoted fields, embedded commas and newlines, a byte-order mark and blank lines are read as RFC 4180 says; the
 * delimiter is the header's: `,`, `;`, a tab or `|`, and a tab in a .tsv) as a
 * tandem `Dataset` of 1-D samples, the feature columns (`--feature-columns A,B`, default every other column, in the
 * file's order). The label column's values are classes, in sorted order (numerically when every value is a number,
 * else by code unit; `1` and `1.0` one class): class 0 is the first; or, with a regression loss, float targets.
 * Every feature and label must be there and be a number where one is needed: an empty or non-numeric field is
 * BAD_DATA naming the row, its line and the column. Samples are the rows in file order (held-out: the last rows).
 */
import type * as CsvParse from 'csv-parse/sync';
import { readFileSync, statSync } from 'node:fs';
import { constants } from 'node:buffer';
import { TandemError } from '../errors.js';
import type { Dataset } from './dataset.js';
import type { CsvSpec } from './file-data-spec.js';

/** A decimal number as written in a CSV (`1`, `-2.5`, `.5`, `1e-3`); not hex, not `Infinity`, not blank. */
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

interface Row {
  record: string[];
  info: { lines: number };
}

/** The stamp of a CSV file as it is now: its size and modification time. */
export function csvStamp(file: string): string {
  const s = statSync(file, { throwIfNoEntry: false });
  if (!s) throw new TandemError('BAD_DATA', `--data ${file}: no such file`);
  if (!s.isFile())
    throw new TandemError(
      'BAD_DATA',
      `--data ${file}: not a regular file (${s.isDirectory() ? 'a directory' : 'a device, FIFO or socket'}); ` +
        'give a CSV file',
    );
  return `${s.size}-${s.mtimeMs}`;
}

/**
 * The dataset of `spec`. csv-parse is imported here, when a CSV is read: a run on other data never loads it (the GPU
 * bundle does not carry it).
 */
export async function readCsv(spec: CsvSpec): Promise<Dataset> {
  if (csvStamp(spec.file) !== spec.stamp) {
    throw new TandemError(
      'BAD_DATA',
      `${spec.file} changed while the run started; leave it unchanged during a run, and start the run again`,
    );
  }
  const { parse } = await import('csv-parse/sync');
  const [header, ...rows] = parseRows(spec.file, parse);
  if (!header || rows.length === 0)
    throw new TandemError('BAD_DATA', `${spec.file}: expected a header row and one row per sample; found no sample`);
  const names = header.record;
  const column = columnIndex(spec, names);
  const label = column(spec.labelColumn, '--label-column');
  const features = featureNames(spec, names).map(n => column(n, '--feature-columns'));
  if (features.includes(label))
    throw new TandemError('BAD_CONFIG', `--feature-columns: ${spec.labelColumn} is the label column, not a feature`);
  if (features.length === 0) throw new TandemError('BAD_CONFIG', `${spec.file}: no feature column besides the label`);
  const x = new Float32Array(rows.length * features.length);
  rows.forEach((row, r) =>
    features.forEach((c, k) => (x[r * features.length + k] = numberAt(spec, row, r, c, names[c]))),
  );
  const labelled = spec.label === 'target' ? targets(spec, rows, label, names[label]) : classes(spec, rows, label);
  const per = features.length;
  return {
    size: rows.length,
    sampleShape: [per],
    classes: labelled.classNames?.length ?? 1,
    ...(labelled.classNames ? { classNames: labelled.classNames } : {}),
    label: index => labelled.values[index],
    read(index, out, offset) {
      out.set(x.subarray(index * per, (index + 1) * per), offset);
      return labelled.values[index];
    },
  };
}

/** The feature columns' names: as given (an entry that is no column's name split at commas), else all but the label. */
function featureNames(spec: CsvSpec, names: string[]): string[] {
  if (!spec.featureColumns) {
    const unnamed = names.indexOf('');
    if (unnamed >= 0)
      throw new TandemError(
        'BAD_DATA',
        `${spec.file}: column ${unnamed + 1} of the header has no name, and every column but the label is a ` +
          "feature by default (pandas' to_csv writes its row index so; to_csv(index=False) leaves it out): name " +
          'it, or choose the features with --feature-columns',
      );
    return names.filter(n => n !== spec.labelColumn);
  }
  return spec.featureColumns.flatMap(c => (names.includes(c) ? [c] : splitNames(c, names)));
}

/** `text` split at its commas, keeping together the parts that make up a column's name (`b, cm,a` → `b, cm`, `a`). */
function splitNames(text: string, names: string[]): string[] {
  const out: string[] = [];
  let current: string | undefined;
  for (const part of text.split(',')) {
    current = current === undefined ? part : `${current},${part}`;
    if (names.includes(current) || names.includes(current.trim())) {
      out.push(names.includes(current) ? current : current.trim());
      current = undefined;
    }
  }
  if (current !== undefined) out.push(...current.split(',').map(p => p.trim()));
  return out;
}

function parseRows(file: string, parse: typeof CsvParse.parse): Row[] {
  const text = utf8Text(file);
  try {
    return parse(text, {
      delimiter: delimiterOf(file, text),
      info: true,
      bom: true,
      trim: true,
      skip_empty_lines: true,
    }) as unknown as Row[];
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new TandemError('BAD_DATA', `${file} is not a CSV file tandem can read: ${why}`, undefined, { cause: err });
  }
}

/** Delimiters a header row may use, in the order that breaks a tie. */
const DELIMITERS = [',', ';', '\t', '|'] as const;

/**
 * The delimiter of `text`: a tab in a .tsv; else the one its header row (its first line that is not blank) holds most
 * often outside quotes, as a spreadsheet's "CSV" of another locale uses `;`; a comma when it holds none.
 */
export function delimiterOf(file: string, text: string): string {
  if (file.toLowerCase().endsWith('.tsv')) return '\t';
  const header =
    text
      .replace(/^\uFEFF/, '')
      .split(/\r?\n/)
      .find(line => line.trim() !== '') ?? '';
  const unquoted = header.replace(/"(?:[^"]|"")*"/g, '');
  const counts = DELIMITERS.map(d => unquoted.split(d).length - 1);
  const most = Math.max(...counts);
  return most === 0 ? ',' : DELIMITERS[counts.indexOf(most)];
}

/** The file's text, else BAD_DATA naming the first line that is not UTF-8 (a Latin-1 `é` would become `�`). */
function utf8Text(file: string): string {
  const size = statSync(file).size;
  if (size > constants.MAX_STRING_LENGTH)
    throw new TandemError(
      'BAD_DATA',
      `${file} is ${(size / 2 ** 20).toFixed(0)} MiB, and tandem parses a CSV whole, as one string of at most ` +
        `${(constants.MAX_STRING_LENGTH / 2 ** 20).toFixed(0)} MiB (V8's limit); split it into files, or stream ` +
        'it from a data module (a tf.data.generator of batches)',
    );
  const bytes = readFileSync(file);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_ENCODING_INVALID_ENCODED_DATA') throw err;
    const utf16 =
      bytes.length >= 2 && ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff));
    const lossy = bytes.toString('utf8');
    const line = lossy.slice(0, lossy.indexOf('\uFFFD')).split('\n').length;
    throw new TandemError(
      'BAD_DATA',
      `${file} is not UTF-8 text (${utf16 ? 'a UTF-16 file' : `line ${line} has bytes UTF-8 does not have`}); ` +
        `save it as UTF-8 (a spreadsheet's "CSV UTF-8", or iconv -f ${utf16 ? 'utf-16' : 'latin1'} -t utf-8)`,
    );
  }
}

/** The index of column `name` in the header, else BAD_CONFIG naming the flag and the columns there are. */
function columnIndex(spec: CsvSpec, names: string[]): (name: string, flag: string) => number {
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined)
    throw new TandemError('BAD_DATA', `${spec.file}: column "${twice}" appears twice in the header; rename one`);
  return (name, flag) => {
    const i = names.indexOf(name);
    if (i < 0)
      throw new TandemError(
        'BAD_CONFIG',
        `${flag} ${name}: ${spec.file} has no column "${name}"; its columns are ${names.map(n => `"${n}"`).join(', ')}`,
      );
    return i;
  };
}

/** Row `r`'s (0-based, after the header) value in column `c`, a number, else BAD_DATA naming row, line and column. */
function numberAt(spec: CsvSpec, row: Row, r: number, c: number, name: string): number {
  const text = row.record[c];
  const value = NUMBER.test(text) ? Number(text) : NaN;
  if (Number.isFinite(Math.fround(value))) return value;
  const shown = `"${text.length > 40 ? `${text.slice(0, 40)}…` : text}"`;
  throw new TandemError(
    'BAD_DATA',
    `${spec.file}: row ${r + 1} (line ${row.info.lines}), column "${name}": ` +
      (text === ''
        ? 'the value is missing; fill it in or drop the row (tandem imputes nothing)'
        : Number.isNaN(value)
          ? `${shown} is not a number; ${name === spec.labelColumn ? 'regression targets' : 'features'} are numbers` +
            (/^[+-]?\d*,\d+$/.test(text) ? ` (a decimal comma: write ${text.replace(',', '.')})` : '')
          : `${shown} is beyond a 32-bit float (±3.4e38), the precision tandem trains in; scale the column`),
  );
}

function targets(spec: CsvSpec, rows: Row[], c: number, name: string): { values: Float32Array; classNames?: string[] } {
  return { values: Float32Array.from(rows, (row, r) => numberAt(spec, row, r, c, name)) };
}

/** The label column's values as classes, in sorted order. */
function classes(spec: CsvSpec, rows: Row[], c: number): { values: Int32Array; classNames: string[] } {
  rows.forEach((row, r) => {
    if (row.record[c] === '')
      throw new TandemError(
        'BAD_DATA',
        `${spec.file}: row ${r + 1} (line ${row.info.lines}), column "${spec.labelColumn}": the label is missing; ` +
          'give every row its label, or drop the row',
      );
  });
  const distinct = [...new Set(rows.map(row => row.record[c]))];
  if (!distinct.every(v => NUMBER.test(v))) {
    const classNames = distinct.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const index = new Map(classNames.map((n, i) => [n, i]));
    return { values: Int32Array.from(rows, row => index.get(row.record[c]) as number), classNames };
  }
  // numbers: one class per value (`1` and `1.0` are one class), named as the file first writes it
  const named = new Map<number, string>();
  for (const v of distinct) if (!named.has(Number(v))) named.set(Number(v), v);
  const numbers = [...named.keys()].sort((a, b) => a - b);
  const index = new Map(numbers.map((n, i) => [n, i]));
  return {
    values: Int32Array.from(rows, row => index.get(Number(row.record[c])) as number),
    classNames: numbers.map(n => named.get(n) as string),
  };
}
