// --data FILE.csv --label-column NAME: string labels become classes in sorted order (labels.json), numeric ones in
// numeric order, the features the chosen columns in the order given; a run equals the same run on a data module
// holding the same numbers. A missing or non-numeric value is refused naming its row, line and column. A numeric
// label with a regression loss is a float target (equal to the module run again). Resume mid-epoch is exact.
// Numeric labels are classes by value (1 and 1.0 one class); a number past float32, a file that is not UTF-8, one
// past V8's longest string, a decimal comma, an unnamed header column (pandas' index) and a link to a device are
// refused naming the file and the fix. The delimiter is the header's (`;`, a tab, `|`), a tab in a .tsv: each file
// trains bit for bit as the comma-separated one.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { constants } from 'node:buffer';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-csv-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/${name}`, import.meta.url));
const N = 60;
const feature = (i: number, k: number) => Math.fround((((i * 37 + k * 11) % 23) - 11) / 8);
/** Row i: features a, b, c and a species whose sorted class id is (i % 3)'s. */
const species = (i: number) => ['setosa', 'versicolor', 'virginica'][i % 3];

function write(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

const irisCsv = write(
  'iris.csv',
  `a,"b, cm",species,c\n` +
    Array.from({ length: N }, (_, i) => `${feature(i, 0)},"${feature(i, 1)}",${species(i)},${feature(i, 2)}`).join(
      '\n',
    ) +
    '\n\n',
);
/**
 * The same samples as a data module: features [b, a] (the order --feature-columns gives: `b, cm,a`, a column's own
 * name kept whole, the rest split at commas), labels sorted.
 */
const irisModule = write(
  'iris.mjs',
  `const f = (i, k) => Math.fround((((i * 37 + k * 11) % 23) - 11) / 8);
export default () => ({ size: ${N}, sampleShape: [2], classes: 3,
  read(i, out, offset) { out[offset] = f(i, 1); out[offset + 1] = f(i, 0); return i % 3; } });`,
);
const base: TrainConfig = { model: 'mlp', devices: 2, backend: 'cpu', batch: 8, seed: 5, epochs: 2 };
const sameBits = (a: TrainSummary, b: TrainSummary) =>
  a.weights.every((w, k) => w.values.every((v, i) => Object.is(v, b.weights[k].values[i])));

t.test('string labels: classes in sorted order, labels.json; features in the order given; = a module run', async t => {
  const out = path.join(dir, 'out');
  const csv = await train({ ...base, data: irisCsv, labelColumn: 'species', featureColumns: ['b, cm,a'], out });
  t.same(JSON.parse(readFileSync(path.join(out, 'labels.json'), 'utf8')), ['setosa', 'versicolor', 'virginica']);
  const module = await train({ ...base, data: irisModule });
  t.ok(sameBits(csv, module), 'bit for bit the run on the same numbers from a data module');
  t.equal(csv.steps, 14, '60 rows, batch 8, 2 epochs');
});

t.test('semicolons, tabs, bars and a .tsv: the same samples as the commas', async t => {
  const commas = readFileSync(irisCsv, 'utf8');
  const run = (data: string) => train({ ...base, epochs: 1, data, labelColumn: 'species', featureColumns: ['a', 'c'] });
  const want = await run(irisCsv);
  // the comma inside the quoted column name stays; every field's other commas are delimiters
  const as = (d: string) => commas.replace(/"[^"]*"|,/g, m => (m === ',' ? d : m.replace(/,/g, ';')));
  for (const [name, d] of [
    ['semicolons.csv', ';'],
    ['tabs.csv', '\t'],
    ['bars.csv', '|'],
    ['tabs.tsv', '\t'],
  ]) {
    const got = await run(write(name, as(d)));
    t.ok(sameBits(got, want), `${name}: bit for bit the comma-separated run`);
  }
});

t.test('numeric labels are sorted as numbers; a missing or non-numeric value names its row and column', async t => {
  const numeric = write('numeric.csv', 'x,y,label\n1,2,10\n2,3,9\n3,4,10\n4,5,9\n5,6,2\n6,7,2\n');
  const out = path.join(dir, 'numeric-out');
  await train({ ...base, epochs: 1, batch: 2, data: numeric, labelColumn: 'label', out });
  t.same(JSON.parse(readFileSync(path.join(out, 'labels.json'), 'utf8')), ['2', '9', '10']);
  const threads = osThreads();
  const missing = write('missing.csv', 'x,y,label\n1,2,a\n2,,b\n3,4,a\n');
  await t.rejects(train({ ...base, data: missing, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /missing\.csv: row 2 \(line 3\), column "y": the value is missing; fill it in or drop the row/,
  });
  const word = write('word.csv', 'x,y,label\n1,2,a\n2,3,b\n3,four,a\n');
  await t.rejects(train({ ...base, data: word, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /word\.csv: row 3 \(line 4\), column "y": "four" is not a number/,
  });
  const noLabel = write('no-label.csv', 'x,y,label\n1,2,a\n2,3,\n');
  await t.rejects(train({ ...base, data: noLabel, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /row 2 \(line 3\), column "label": the label is missing/,
  });
  await t.rejects(train({ ...base, data: word, labelColumn: 'kind' }), {
    code: 'BAD_CONFIG',
    message: /--label-column kind: .*word\.csv has no column "kind"; its columns are "x", "y", "label"/,
  });
  await t.rejects(train({ ...base, data: word }), { code: 'BAD_CONFIG', message: /--label-column NAME/ });
  await t.rejects(train({ ...base, data: 'synthetic-images', labelColumn: 'label' }), {
    code: 'BAD_CONFIG',
    message: /labelColumn.*applies to --data FILE\.csv \(or \.tsv\); data 'synthetic-images' is no CSV/,
  });
  await t.rejects(train({ ...base, data: word, labelColumn: 'label', dataCache: dir }), {
    code: 'BAD_CONFIG',
    message: /dataCache.*is where an image folder's decoded images go/,
  });
  t.equal(osThreads(), threads, 'all refused before any thread');
});

t.test('numeric labels are classes by value; overflow, non-UTF-8 text and an unnamed column are refused', async t => {
  // "1" and "1.0" were two classes (and "0", "-0"): a class per spelling
  const spelled = write('spelled.csv', 'x,y,label\n1,2,1\n2,3,0\n3,4,1.0\n4,5,-0\n5,6,1e0\n6,7,0.0\n');
  const out = path.join(dir, 'spelled-out');
  await train({ ...base, epochs: 1, batch: 2, data: spelled, labelColumn: 'label', out });
  t.same(JSON.parse(readFileSync(path.join(out, 'labels.json'), 'utf8')), ['0', '1'], 'named as first written');
  const threads = osThreads();
  // 1e999 was read as Infinity, 1e39 became Infinity as a float32: refused later as "in the data module", no row
  for (const big of ['1e999', '-1e39']) {
    const huge = write('huge.csv', `x,y,label\n1,2,a\n2,${big},b\n`);
    await t.rejects(train({ ...base, data: huge, labelColumn: 'label' }), {
      code: 'BAD_DATA',
      message: new RegExp(`huge\\.csv: row 2 \\(line 3\\), column "y": "${big}" is beyond a 32-bit float`),
    });
  }
  // a Latin-1 é became U+FFFD in the class names; UTF-16 was "Invalid Record Length"
  const latin1 = path.join(dir, 'latin1.csv');
  writeFileSync(latin1, Buffer.from('x,y,label\n1,2,caf\xe9\n2,3,the\n', 'latin1'));
  await t.rejects(train({ ...base, data: latin1, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /latin1\.csv is not UTF-8 text \(line 2 has bytes UTF-8 does not have\); save it as UTF-8/,
  });
  const utf16 = path.join(dir, 'utf16.csv');
  writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('x,label\r\n1,a\r\n2,b\r\n', 'utf16le')]));
  await t.rejects(train({ ...base, data: utf16, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /utf16\.csv is not UTF-8 text \(a UTF-16 file\)/,
  });
  // past V8's longest string (a sparse file: no disk, nothing read): was "not a CSV file … Cannot create a string"
  const large = write('large.csv', 'x,label\n');
  truncateSync(large, constants.MAX_STRING_LENGTH + 1);
  await t.rejects(train({ ...base, data: large, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /large\.csv is 512 MiB, and tandem parses a CSV whole, as one string of at most 512 MiB/,
  });
  rmSync(large);
  // a European spreadsheet's CSV: separated by semicolons, with a decimal comma
  const decimalComma = write('decimal-comma.csv', 'x;y;label\n1;2,5;a\n2;3;b\n');
  await t.rejects(train({ ...base, data: decimalComma, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message:
      /row 1 \(line 2\), column "y": "2,5" is not a number; features are numbers \(a decimal comma: write 2\.5\)/,
  });
  // pandas' to_csv() writes its row index as a column with no name: it was trained on as a feature
  const pandas = write('pandas.csv', ',x,label\n0,1,a\n1,2,b\n');
  await t.rejects(train({ ...base, data: pandas, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /pandas\.csv: column 1 of the header has no name.*to_csv\(index=False\).*--feature-columns/,
  });
  await train({ ...base, epochs: 1, batch: 2, data: pandas, labelColumn: 'label', featureColumns: ['x'] });
  // a link to a device: it was "no such file", though there is one
  const device = path.join(dir, 'device.csv');
  symlinkSync('/dev/zero', device);
  await t.rejects(train({ ...base, data: device, labelColumn: 'label' }), {
    code: 'BAD_DATA',
    message: /device\.csv: not a regular file \(a device, FIFO or socket\); give a CSV file/,
  });
  t.equal(osThreads(), threads, 'all refused before any thread');
});

t.test('regression from a CSV: a numeric label is a float target; = the module run; resume mid-epoch', async t => {
  const { default: make } = (await import(fixture('regression.mjs'))) as {
    default: (o: { seed: number }) => { size: number; read(i: number, out: Float32Array, o: number): number };
  };
  const ds = make({ seed: base.seed as number }); // the seed tandem hands the module's factory
  const x = new Float32Array(4);
  const rows = Array.from({ length: ds.size }, (_, i) => {
    const y = ds.read(i, x, 0);
    return [...x, y].map(String).join(',');
  });
  const csv = write('regression.csv', `a,b,c,d,target\n${rows.join('\n')}\n`);
  const run: TrainConfig = { ...base, model: fixture('models/regressor.mjs'), loss: 'mse' };
  const fromCsv = await train({ ...run, data: csv, labelColumn: 'target' });
  const fromModule = await train({ ...run, data: fixture('regression.mjs') });
  t.ok(sameBits(fromCsv, fromModule), 'bit for bit the run on the module');
  // Resume in the middle of the second epoch (12 steps an epoch): indices of the rows, from the checkpoint's step.
  const ckpt = path.join(dir, 'ckpt');
  const full = await train({ ...run, data: csv, labelColumn: 'target', checkpointEvery: 17, checkpointDir: ckpt });
  const resumed = await train({ ...run, data: csv, labelColumn: 'target', resume: ckpt });
  t.equal(resumed.firstStep, 18);
  t.ok(sameBits(resumed, full), '17 + 7 steps = 24 uninterrupted steps, bit for bit');
});
