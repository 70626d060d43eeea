// Files from outside (docs/guide/security.md), fuzzed with seeded fast-check: model.json and a checkpoint, mutated by
// named classes of mutation. Every mutation is refused with a named TandemError (BAD_MODEL, BAD_CHECKPOINT) or reads
// back identical; none hangs nor crashes. model.json: weights paths that leave the model's directory (`..`, absolute,
// a symbolic link out, a device), a directory, unknown or prototype dtypes, shapes that overflow, a weights file
// truncated or too long. Checkpoints crafted with a recomputed checksum: every field's type, length and range, deep
// nesting; and raw bit flips of the file. checkAgainstRun names the field that does not fit the run. (A hook's
// options are the hook's own: the run compares them with its own, checkHookState, and is not fuzzed here.)
// Values JSON cannot hold (a BigInt, a cycle, a Map, deep nesting) are refused by field too; a crafted fingerprint
// nested past the stack is named as a whole. A model.json or a checkpoint that is a link to a device (/dev/zero) is
// refused by what it is, before a byte is read.
import t from 'tap';
import fc from 'fast-check';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Packr } from 'msgpackr';
import { TandemError } from '../src/errors.js';
import { readLayersModelFiles } from '../src/model/layers-model-files.js';
import {
  decodeCheckpoint,
  newestWholeCheckpoint,
  readCheckpoint,
  writeCheckpoint,
  type Checkpoint,
} from '../src/checkpoint/checkpoint-file.js';
import { checkAgainstRun } from '../src/checkpoint/checkpoint-fields.js';
import { fingerprintDifferences } from '../src/trainer/run-checkpoints.js';

const dir = mkdtempSync(path.join(tmpdir(), 'tandem-untrusted-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const SEED = 32;

const WEIGHTS = Buffer.from(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9]).buffer);
const SPECS = [
  { name: 'w', shape: [2, 3], dtype: 'float32' },
  { name: 'b', shape: [3], dtype: 'float32' },
];
const MANIFEST = {
  modelTopology: { class_name: 'Sequential' },
  weightsManifest: [{ paths: ['weights.bin'], weights: SPECS }],
};

type Json = Record<string, unknown>;
const clone = (): Json => JSON.parse(JSON.stringify(MANIFEST)) as Json;
const group = (m: Json) => (m.weightsManifest as Json[])[0];
const spec = (m: Json, i: number) => (group(m).weights as Json[])[i];

/** The named classes of model.json mutation. */
const MODEL_MUTATIONS: Record<string, fc.Arbitrary<(m: Json) => void>> = {
  'path leaves the directory': fc
    .constantFrom('../weights.bin', '../../etc/passwd', 'sub/../../weights.bin', '/etc/passwd', '/dev/zero', 'out-link')
    .map(p => (m: Json) => void (group(m).paths = [p])),
  'path is a directory or a device': fc
    .constantFrom('.', 'sub', 'zero-link', 'weights.bin\0x')
    .map(p => (m: Json) => void (group(m).paths = [p])),
  'dtype unknown or a prototype key': fc
    .tuple(
      fc.constantFrom('string', 'float64', '__proto__', 'constructor', 'toString', 'hasOwnProperty', ''),
      fc.nat(1),
    )
    .map(
      ([d, i]) =>
        (m: Json) =>
          void (spec(m, i).dtype = d),
    ),
  'shape overflows or is not a size': fc
    .constantFrom([2 ** 31, 2 ** 31], [2 ** 53, 2], [1e300], [-1], [1.5], ['3'], [2 ** 40])
    .map(s => (m: Json) => void (spec(m, 0).shape = s)),
  'weights of another size': fc
    .constantFrom([3, 3], [2, 2], [9, 1], [100])
    .map(s => (m: Json) => void (spec(m, 0).shape = s)),
  'structure replaced': fc
    .tuple(fc.constantFrom('weightsManifest', 'paths', 'weights', 'modelTopology'), fc.jsonValue({ maxDepth: 2 }))
    .map(([key, v]) => (m: Json) => {
      if (key === 'paths' || key === 'weights') group(m)[key] = v;
      else m[key] = v;
    }),
};

t.test('model.json mutations: refused with BAD_MODEL or read back identical', async t => {
  const model = path.join(dir, 'model');
  mkdirSync(path.join(model, 'sub'), { recursive: true });
  writeFileSync(path.join(model, 'weights.bin'), WEIGHTS);
  writeFileSync(path.join(dir, 'weights.bin'), WEIGHTS); // what `../weights.bin` would reach
  symlinkSync('/etc/hostname', path.join(model, 'out-link'));
  symlinkSync('/dev/zero', path.join(model, 'zero-link'));
  const json = path.join(model, 'model.json');
  writeFileSync(json, JSON.stringify(MANIFEST));
  const good = await readLayersModelFiles(json);
  t.ok(Buffer.from(good.weightData).equals(WEIGHTS), 'the genuine model reads back');
  for (const [name, mutation] of Object.entries(MODEL_MUTATIONS)) {
    const outcomes = { refused: 0, identical: 0 };
    await fc.assert(
      fc.asyncProperty(mutation, async mutate => {
        const m = clone();
        mutate(m);
        await writeFile(json, JSON.stringify(m));
        try {
          // Read back: the weights file's bytes as the manifest describes them (all of them, or none for a manifest
          // of no weights), never a byte from elsewhere.
          const read = Buffer.from((await readLayersModelFiles(json)).weightData);
          if (!read.equals(WEIGHTS) && read.length !== 0) return false;
          outcomes.identical++;
          return true;
        } catch (err) {
          if (!(err instanceof TandemError) || err.code !== 'BAD_MODEL') throw err;
          outcomes.refused++;
          return true;
        }
      }),
      { seed: SEED, numRuns: 25 },
    );
    t.ok(outcomes.refused > 0, `${name}: ${outcomes.refused} refused, ${outcomes.identical} read back identical`);
  }
  // A file too long or truncated, whatever its size.
  for (const bytes of [WEIGHTS.subarray(0, 35), Buffer.concat([WEIGHTS, Buffer.alloc(1 << 20)])]) {
    writeFileSync(json, JSON.stringify(MANIFEST));
    writeFileSync(path.join(model, 'weights.bin'), bytes);
    await t.rejects(readLayersModelFiles(json), {
      code: 'BAD_MODEL',
      message: bytes.length < 36 ? /hold 35 bytes.*truncated/ : /hold more than 36 bytes.*too long/,
    });
  }
});

const packr = new Packr({ structuredClone: true });
const CKPT: Checkpoint = {
  step: 3,
  weights: [{ name: 'w', shape: [2, 2] }],
  params: new Float32Array([1, 2, 3, 4]),
  optimizerState: [new Float32Array([0.5, 0.5, 0.5, 0.5])],
  heads: [{ w: new Float32Array([1]), state: [[new Float32Array([2])]] }],
  commHook: { name: 'powersgd', options: { rank: 1 }, ranks: [[[new Float32Array([3])]]] },
  fingerprint: 'the run',
};

/** A checkpoint file of `payload` with its checksum recomputed: what an attacker who edits one writes. */
function crafted(payload: Uint8Array): Buffer {
  const sha256 = createHash('sha256').update(payload).digest('hex');
  return packr.pack({ magic: 'tandem-checkpoint', version: 1, sha256, payload });
}

type Mutable = Record<string, unknown>;
const field = fc.constantFrom('step', 'weights', 'params', 'optimizerState', 'heads', 'commHook', 'fingerprint');
const strange = fc.oneof(
  fc.constantFrom(-1, 1.5, 2 ** 60, NaN, Infinity, '3', null, [], {}, true),
  fc.constantFrom(new Float64Array(4), new Float32Array(3), new Float32Array([NaN, 1, 2, 3]), [1, 2, 3, 4]),
  fc.anything({ maxDepth: 2 }),
);

/** The named classes of checkpoint mutation: each yields the bytes of a file. */
const CKPT_MUTATIONS: Record<string, fc.Arbitrary<Uint8Array>> = {
  'a field replaced (checksum recomputed)': fc.tuple(field, strange).map(([k, v]) => {
    const c = { ...CKPT } as Mutable;
    c[k] = v;
    return crafted(packr.pack(c));
  }),
  'a nested field replaced (checksum recomputed)': fc
    .tuple(
      fc.constantFrom('weights.0.shape', 'heads.0.w', 'heads.0.state', 'commHook.ranks', 'optimizerState.0'),
      strange,
    )
    .map(([p, v]) => {
      const c = structuredClone(CKPT) as unknown as Mutable;
      const keys = p.split('.');
      let o = c as Record<string, unknown>;
      for (const k of keys.slice(0, -1)) o = o[k] as Record<string, unknown>;
      o[keys.at(-1)!] = v;
      return crafted(packr.pack(c));
    }),
  // heads, commHook are optional (files of runs without them): the run decides (restore, hookStartsAfresh)
  'a required field removed (checksum recomputed)': fc
    .constantFrom('step', 'weights', 'params', 'optimizerState', 'fingerprint')
    .map(k => {
      const c = { ...CKPT } as Mutable;
      delete c[k];
      return crafted(packr.pack(c));
    }),
  'deep nesting (checksum recomputed)': fc.integer({ min: 1000, max: 200_000 }).map(depth => {
    const bytes = Buffer.alloc(depth + 1, 0x91); // fixarray of 1, nested
    bytes[depth] = 0xc0;
    return crafted(bytes);
  }),
  'random payload (checksum recomputed)': fc.uint8Array({ maxLength: 200 }).map(b => crafted(b)),
  'bit flips of the file': fc
    .array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 4 })
    .map(flips => {
      const file = crafted(packr.pack(CKPT));
      for (const [at, bit] of flips) file[at % file.length] ^= 1 << bit;
      return file;
    }),
};

t.test('checkpoint mutations: refused with BAD_CHECKPOINT or read back identical', async t => {
  const file = await writeCheckpoint(path.join(dir, 'ckpt'), CKPT);
  t.same(decodeCheckpoint(await readFile(file), file), CKPT, 'the genuine checkpoint reads back');
  for (const [name, mutation] of Object.entries(CKPT_MUTATIONS)) {
    const outcomes = { refused: 0, identical: 0 };
    fc.assert(
      fc.property(mutation, bytes => {
        try {
          const back = decodeCheckpoint(bytes, 'mutated');
          t.same(back, CKPT, `${name}: what reads back is the checkpoint`);
          outcomes.identical++;
        } catch (err) {
          if (!(err instanceof TandemError) || err.code !== 'BAD_CHECKPOINT') throw err;
          outcomes.refused++;
        }
      }),
      { seed: SEED, numRuns: 40 },
    );
    t.ok(outcomes.refused > 0, `${name}: ${outcomes.refused} refused, ${outcomes.identical} read back identical`);
  }
  t.throws(() => decodeCheckpoint(crafted(packr.pack({ ...CKPT, params: new Float32Array(3) })), 'short'), {
    code: 'BAD_CHECKPOINT',
    message: /field params has 3 floats, and its weights' shapes hold 4/,
  });
});

t.test("checkAgainstRun names the field that does not fit the run's buffers", async t => {
  const run = { params: 4, slots: [4], state: 0 };
  t.doesNotThrow(() => checkAgainstRun(CKPT, 'c', run));
  t.throws(() => checkAgainstRun(CKPT, 'c', { ...run, params: 5 }), { message: /field params has 4 floats.*5/ });
  t.throws(() => checkAgainstRun(CKPT, 'c', { ...run, slots: [4, 4] }), { message: /field optimizerState has 1/ });
  t.throws(() => checkAgainstRun(CKPT, 'c', { ...run, slots: [5] }), { message: /field optimizerState\[0\] has 4/ });
});

t.test('values JSON cannot hold are refused by field: a BigInt, a cycle, a Map, deep nesting', async t => {
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  let deep: unknown = 1;
  for (let i = 0; i < 50; i++) deep = { deep };
  const cases: [string, Mutable, RegExp][] = [
    ['step a BigInt', { ...CKPT, step: 2n ** 63n }, /field step is bigint 9223372036854775808, expected ≥ 0/],
    ['shape a BigInt', { ...CKPT, weights: [{ name: 'w', shape: [2n ** 64n] }] }, /field weights\[0\]\.shape\[0\]/],
    ['fingerprint a BigInt', { ...CKPT, fingerprint: 1n }, /field fingerprint is bigint 1, expected a string/],
    ['hook options a cycle', { ...CKPT, commHook: { ...CKPT.commHook, options: cyclic } }, /commHook\.options\.self/],
    ['hook option a BigInt', { ...CKPT, commHook: { ...CKPT.commHook, options: { rank: 1n } } }, /options\.rank is/],
    ['hook options a Map', { ...CKPT, commHook: { ...CKPT.commHook, options: { m: new Map() } } }, /\[object Map\]/],
    ['hook options deep', { ...CKPT, commHook: { ...CKPT.commHook, options: deep as object } }, /nested deeper/],
  ];
  for (const [name, c, message] of cases)
    t.throws(() => decodeCheckpoint(crafted(packr.pack(c)), name), { code: 'BAD_CHECKPOINT', message }, name);
  // The fingerprint is compared as JSON: one nested past the stack is named as a whole, never a RangeError.
  const nested = `{"model":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
  t.same(fingerprintDifferences(nested, '{"model":"mlp"}'), [], 'a fingerprint nested past the stack');
  const [long] = fingerprintDifferences(`{"model":"${'x'.repeat(10_000)}"}`, '{"model":"mlp"}');
  t.ok(long.length < 300, `a long value is cut short in the message (${long.length} characters)`);
});

t.test('a name leading to a device is refused before a byte is read: model.json, a checkpoint', async t => {
  const model = path.join(dir, 'device-model');
  mkdirSync(model);
  symlinkSync('/dev/zero', path.join(model, 'model.json'));
  await t.rejects(readLayersModelFiles(path.join(model, 'model.json')), {
    code: 'BAD_MODEL',
    message: /model\.json: cannot read it: it is not a regular file \(a device, FIFO or socket\)/,
  });
  // A directory whose newest checkpoint is a link to /dev/zero: skipped, naming it; the one before it is read.
  const ckpts = path.join(dir, 'device-checkpoints');
  const older = await writeCheckpoint(ckpts, CKPT);
  symlinkSync('/dev/zero', path.join(ckpts, 'checkpoint-000000009.tandem'));
  const newest = await newestWholeCheckpoint(ckpts);
  t.equal(newest.source, older);
  t.match(newest.skipped, [/checkpoint-000000009\.tandem: not readable: it is not a regular file/]);
  await t.rejects(readCheckpoint(path.join(ckpts, 'checkpoint-000000009.tandem')), {
    code: 'BAD_CHECKPOINT',
    message: /checkpoint-000000009\.tandem cannot be read: it is not a regular file/,
  });
});
