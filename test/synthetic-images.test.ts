// synthetic-images keeps the samples it drew (up to SYNTHETIC_CACHE_FLOATS per reader): a sample read again is the
// same bits and label as the first time and as a fresh reader's; past the cap samples are drawn each time, still the
// same; the reader fills only its own sample's range of the output.
import t from 'tap';
import { SYNTHETIC_CACHE_FLOATS, syntheticImages } from '../src/data/synthetic-images.js';

const identical = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

t.test('a sample read again: the same values and label, from the reader that kept it', async t => {
  const options = { seed: 5, size: 64, classes: 7, imageShape: [9, 11, 3] as [number, number, number] };
  const kept = syntheticImages(options);
  const floats = 9 * 11 * 3;
  const first = new Float32Array(floats * 3).fill(-7),
    again = new Float32Array(floats * 3).fill(-7);
  const labels = [kept.read(13, first, floats), kept.read(13, again, floats)];
  t.equal(labels[0], labels[1], 'same label');
  t.equal(labels[0], kept.label!(13), 'the label the dataset names for it');
  t.ok(identical(first, again), 'same values, the rest of the output untouched');
  t.ok(first.subarray(0, floats).every(v => v === -7) && first.subarray(2 * floats).every(v => v === -7));
  const fresh = new Float32Array(floats * 3).fill(-7);
  syntheticImages(options).read(13, fresh, floats);
  t.ok(identical(first, fresh), "a fresh reader's draw is the same");
  const other = new Float32Array(floats * 3).fill(-7);
  kept.read(14, other, floats);
  t.notOk(identical(first, other), 'another index, other values');
});

t.test('past the cap, samples are drawn each time, the same values', async t => {
  const side = 512,
    channels = 16; // 4 Mi floats a sample: the cap holds 4
  const perSample = side * side * channels;
  t.equal(Math.floor(SYNTHETIC_CACHE_FLOATS / perSample), 4, 'the cap holds 4 such samples');
  const ds = syntheticImages({ seed: 2, size: 8, classes: 3, imageShape: [side, side, channels] });
  const out = new Float32Array(perSample);
  for (let i = 0; i < 5; i++) ds.read(i, out, 0);
  const a = new Float32Array(perSample),
    b = new Float32Array(perSample);
  t.equal(ds.read(4, a, 0), ds.read(4, b, 0), 'same label drawn twice');
  t.ok(identical(a, b), 'same values drawn twice');
  const c = new Float32Array(perSample);
  ds.read(3, c, 0);
  const fresh = new Float32Array(perSample);
  syntheticImages({ seed: 2, size: 8, classes: 3, imageShape: [side, side, channels] }).read(3, fresh, 0);
  t.ok(identical(c, fresh), 'a kept sample is the one drawn');
});
