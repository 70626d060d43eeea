// BMP files are images of an image folder, as Keras' image_dataset_from_directory reads them. Every bit depth (1, 4,
// 8 through a palette; 24; 16 and 32 through bit masks, with and without alpha), bottom-up and top-down rows, odd
// widths (rows padded to 4 bytes, a 4-bit row's half byte), pixels after a gap, decode to the pixels an independent
// encoder (fixtures/bmp-file.ts) wrote, each channel read to the full range as Pillow reads it; a folder of BMP files
// trains; a file whose header asks for more than the file holds, or more than sharp's pixel limit, or a depth,
// compression or mask tandem does not read, is refused before anything is decoded, naming the file.
import t, { type Test } from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';
import { bmpPixels, MAX_IMAGE_PIXELS } from '../src/data/bmp-pixels.js';
import { openImageFolder, prepareImageFolder } from '../src/data/image-folder.js';
import { bmpFile, decodedColour, type BmpSpec, type Rgba } from './fixtures/bmp-file.js';
import { writeImageModel } from './fixtures/image-folder.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-image-bmp-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

const DEPTHS = [1, 4, 8, 24, 32] as const;
const COLOURS: Rgba[] = [
  [255, 0, 0, 255],
  [0, 255, 0, 255],
  [0, 0, 255, 255],
  [10, 20, 30, 255],
];

/** A pattern of the colours (two of them at 1 bit), and at 32 bits an alpha that changes along the row. */
function pattern(bitPP: BmpSpec['bitPP']): BmpSpec['pixel'] {
  const colours = bitPP === 1 ? [COLOURS[3], [250, 240, 230, 255] as Rgba] : COLOURS;
  return (x, y) => {
    const c: Rgba = [...colours[(x * 7 + y * 3) % colours.length]];
    if (bitPP === 32) c[3] = (x * 40 + y * 3) % 256;
    return c;
  };
}

t.test('every depth, both row orders, odd widths: the pixels written', async t => {
  for (const bitPP of DEPTHS)
    for (const topDown of [false, true])
      for (const width of [1, 3, 5, 8, 13]) {
        const height = 3;
        const pixel = pattern(bitPP);
        const got = await bmpPixels(bmpFile({ width, height, bitPP, pixel, topDown }));
        const want = Buffer.alloc(width * height * 4);
        for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) want.set(pixel(x, y), (y * width + x) * 4);
        t.same([got.width, got.height], [width, height], `${bitPP} bits, ${width}x${height}, top-down ${topDown}`);
        t.ok(got.rgba.equals(want), `${bitPP} bits, ${width}x${height}, top-down ${topDown}: every pixel RGBA`);
      }
});

/** Colours with each channel's ends and a middle, and an alpha that changes along the row. */
const maskedPixel: BmpSpec['pixel'] = (x, y) => {
  const c = [255, 0, 128, 77, 200, 31][(x + 2 * y) % 6];
  return [c, 255 - c, (c * 3) % 256, [255, 0, 128, 255, 7][(x + y) % 5]];
};

/** The pixels of `spec` decoded, against each pixel's colour as its masks store it (read to the full range). */
async function checkMasked(t: Test, spec: Omit<BmpSpec, 'pixel' | 'width' | 'height'>, label: string) {
  for (const topDown of [false, true])
    for (const width of [1, 3, 6]) {
      const full: BmpSpec = { ...spec, width, height: 4, topDown, pixel: maskedPixel };
      const got = await bmpPixels(bmpFile(full));
      const want = Buffer.alloc(width * 4 * 4);
      for (let y = 0; y < 4; y++)
        for (let x = 0; x < width; x++) want.set(decodedColour(full, maskedPixel(x, y)), (y * width + x) * 4);
      t.ok(got.rgba.equals(want), `${label}, width ${width}, top-down ${topDown}: every pixel RGBA`);
    }
}

t.test('16 and 32 bits through bit masks: each channel read to the full range, alpha only from a mask', async t => {
  const cases: [string, Omit<BmpSpec, 'pixel' | 'width' | 'height'>][] = [
    ['16 bits, BI_RGB (5-5-5)', { bitPP: 16 }],
    ['16 bits, 5-6-5 after the header', { bitPP: 16, compression: 3, masks: [0xf800, 0x07e0, 0x001f, 0] }],
    ['16 bits, 1-5-5-5 BI_ALPHABITFIELDS', { bitPP: 16, compression: 6, masks: [0x7c00, 0x03e0, 0x001f, 0x8000] }],
    ['16 bits, 4-4-4-4 in a V4 header', { bitPP: 16, compression: 3, header: 108, masks: [0xf00, 0xf0, 0xf, 0xf000] }],
    [
      '16 bits, 1-5-5-5 in a V3 header',
      { bitPP: 16, compression: 3, header: 56, masks: [0x7c00, 0x3e0, 0x1f, 0x8000] },
    ],
    ['32 bits, BI_RGB (its 4th byte no alpha)', { bitPP: 32, compression: 0 }],
    ['32 bits, BI_RGB in a V5 header of masks 0', { bitPP: 32, compression: 0, header: 124 }],
    ['32 bits, 8-8-8 after the header', { bitPP: 32, compression: 3, masks: [0xff0000, 0xff00, 0xff, 0] }],
    [
      '32 bits, 2-10-10-10 in a V5 header',
      { bitPP: 32, compression: 3, header: 124, masks: [0x3ff00000, 0xffc00, 0x3ff, 0xc0000000] },
    ],
  ];
  for (const [label, spec] of cases) await checkMasked(t, spec, label);
});

t.test('the pixels are read where the file header says they start, past a gap', async t => {
  for (const bitPP of [8, 16, 24, 32] as const)
    for (const gap of [2, 6]) await checkMasked(t, { bitPP, gap }, `${bitPP} bits, a gap of ${gap} bytes`);
});

/** A solid `colour` image at `bitPP`. */
const solid = (bitPP: BmpSpec['bitPP'], colour: Rgba, width = 5, height = 3) =>
  bmpFile({ width, height, bitPP, pixel: () => colour });

t.test('a folder of BMP files: each sample its colour and alpha, and it trains', async t => {
  const dir = path.join(root, 'folder');
  mkdirSync(path.join(dir, 'a'), { recursive: true });
  mkdirSync(path.join(dir, 'b'), { recursive: true });
  const files: Record<string, Rgba> = {
    'a/red24.bmp': [255, 0, 0, 255],
    'a/green8.bmp': [0, 255, 0, 255],
    'a/blue4.BMP': [0, 0, 255, 255],
    'b/grey1.bmp': [128, 128, 128, 255],
    'b/half32.bmp': [40, 80, 120, 128],
  };
  const depth: Record<string, BmpSpec['bitPP']> = { red24: 24, green8: 8, blue4: 4, grey1: 1, half32: 32 };
  for (const [rel, colour] of Object.entries(files))
    writeFileSync(path.join(dir, rel), solid(depth[path.basename(rel).split('.')[0]], colour));
  const shape: [number, number, number] = [3, 5, 4];
  const cacheDir = path.join(dir, '.tandem-cache');
  const prepared = await prepareImageFolder(dir, shape, cacheDir);
  t.equal(prepared.decoded, 5, 'all 5 BMP files decoded');
  t.same(prepared.notes, [], 'nothing left out');
  const ds = await openImageFolder({ kind: 'image-folder', dir, imageShape: shape, cacheDir, stamp: prepared.stamp });
  const out = new Float32Array(3 * 5 * 4);
  const seen: string[] = [];
  for (let i = 0; i < ds.size; i++) {
    const label = ds.read(i, out, 0);
    const uniform = out.every((v, k) => v === out[k % 4]);
    seen.push(`${label}:${[...out.subarray(0, 4)].map(v => Math.round(v * 255)).join(',')}:${uniform}`);
  }
  const want = Object.entries(files).map(([rel, c]) => `${rel.startsWith('a/') ? 0 : 1}:${c.join(',')}:true`);
  t.same(seen.sort(), want.sort(), 'every sample: its class, its colour and alpha, every pixel alike');
  const model = path.join(root, 'model.mjs');
  writeImageModel(model);
  const run: TrainConfig = { model, data: dir, imageSize: [3, 5], devices: 2, backend: 'cpu', batch: 4, steps: 2 };
  const summary = await train(run);
  t.equal(summary.steps, 2, 'a folder of BMP files trains');
});

/** A folder with one good BMP in each class and `bad` (bytes) as b/bad.bmp; the run's refusal. */
async function refusal(name: string, bad: Buffer): Promise<unknown> {
  const dir = path.join(root, name);
  mkdirSync(path.join(dir, 'a'), { recursive: true });
  mkdirSync(path.join(dir, 'b'), { recursive: true });
  writeFileSync(path.join(dir, 'a', 'ok.bmp'), solid(24, [1, 2, 3, 255]));
  writeFileSync(path.join(dir, 'b', 'ok.bmp'), solid(24, [4, 5, 6, 255]));
  writeFileSync(path.join(dir, 'b', 'bad.bmp'), bad);
  const model = path.join(root, 'model.mjs');
  writeImageModel(model);
  const run: TrainConfig = { model, data: dir, imageSize: [3, 5], devices: 2, backend: 'cpu', batch: 2, steps: 1 };
  return train(run).then(
    () => undefined,
    (e: unknown) => e,
  );
}

/** `bytes` with the 32-bit little-endian `value` at `at` (or 16-bit where `bits` is 16). */
function patched(bytes: Buffer, at: number, value: number, bits: 16 | 32 = 32): Buffer {
  const copy = Buffer.from(bytes);
  if (bits === 16) copy.writeUInt16LE(value, at);
  else copy.writeInt32LE(value, at);
  return copy;
}

t.test(
  'a header that asks for what the file cannot hold, or tandem does not read: refused, naming the file',
  async t => {
    const good = solid(24, [9, 9, 9, 255]);
    const fields = bmpFile({
      width: 5,
      height: 3,
      bitPP: 16,
      compression: 3,
      masks: [0xf800, 0x7e0, 0x1f, 0],
      pixel: () => [9, 9, 9, 255],
    });
    const cases: [string, Buffer, RegExp][] = [
      ['short', good.subarray(0, 30), /bad\.bmp \(a BMP file of 30 bytes is shorter than its header\)/],
      [
        'wide',
        patched(patched(good, 18, 1000), 22, 1000),
        /bad\.bmp \(a BMP file of \d+ bytes cannot hold the 1000x1000/,
      ],
      [
        'huge',
        patched(patched(good, 18, 20000), 22, -20000),
        new RegExp(`20000x20000 pixels, more than ${MAX_IMAGE_PIXELS}`),
      ],
      ['empty', patched(good, 18, 0), /bad\.bmp \(a BMP image of 0x3 pixels\)/],
      ['depth', patched(good, 28, 2, 16), /bad\.bmp \(a BMP image of 2 bits a pixel/],
      ['jpeg', patched(good, 30, 4), /bad\.bmp \(a BMP image of compression 4 \(an embedded JPEG or PNG/],
      ['cut', good.subarray(0, good.length - 8), /bad\.bmp \(its pixels do not read as its header says \(bmp-ts: /],
      ['no red', patched(fields, 54, 0), /bad\.bmp \(a BMP image whose red mask 0x0 is not one run of its bits\)/],
      ['split', patched(fields, 58, 0x7e1), /bad\.bmp \(a BMP image whose green mask 0x7e1 is not one run/],
      ['wide mask', patched(fields, 62, 0x1f0000), /whose blue mask 0x1f0000 is not one run of its bits/],
      ['fields at 24', patched(good, 30, 3), /bad\.bmp \(a BMP image of bit fields at 24 bits a pixel/],
      ['offset', patched(good, 10, good.length + 1), /bad\.bmp \(its pixels start at byte \d+, outside the/],
    ];
    for (const [name, bytes, message] of cases) {
      const e = await refusal(name, bytes);
      t.match(
        e,
        { code: 'BAD_DATA', message: /cannot be decoded as PNG, JPEG, GIF, WebP or BMP/ },
        `${name}: BAD_DATA`,
      );
      t.match((e as Error).message, message, `${name}: says why`);
    }
  },
);
