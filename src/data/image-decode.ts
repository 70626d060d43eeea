/**
 * One image file decoded and resized to [height, width, channels] bytes with sharp (libvips: its prebuilt binaries
 * come as npm packages, no download and no install script; JPEG decoding 2-4x the pure-JS jpeg-js, docs/guide/data.md).
 * Resized by stretching to the size (Keras' default, no crop), with a bilinear kernel; channels 1 (grey), 3 (RGB,
 * alpha dropped) or 4 (RGBA). A BMP file is decoded by bmp-pixels.ts, then resized the same way. sharp is imported
 * when an image is first decoded: a run whose cache is warm, or that reads no image folder, never loads it.
 */
import { readFile } from 'node:fs/promises';
import type { Sharp, SharpOptions } from 'sharp';
import { bmpPixels, isBmp } from './bmp-pixels.js';

type SharpFactory = (input: Buffer, options: SharpOptions) => Sharp;

/** What an image folder's files may hold (sharp's format names); of an animated GIF or WebP, the first frame. */
const IMAGE_FORMATS: readonly string[] = ['png', 'jpeg', 'gif', 'webp'];
export const IMAGE_FORMAT_WORDS = 'PNG, JPEG, GIF, WebP or BMP';

let factory: Promise<SharpFactory> | undefined;

async function sharpFactory(): Promise<SharpFactory> {
  factory ??= import('sharp').then(m => {
    m.default.cache(false); // each file is read once: libvips' cache of recent inputs only holds memory
    return m.default as unknown as SharpFactory;
  });
  return factory;
}

/**
 * The bytes of `file` at `shape` ([h, w, c], row-major, channels last); throws sharp's error for a bad file, and an
 * error naming the format of a file that is none of IMAGE_FORMATS.
 */
export async function decodeImage(file: string, shape: readonly [number, number, number]): Promise<Uint8Array> {
  const [h, w, c] = shape;
  const sharp = await sharpFactory();
  const bytes = await readFile(file);
  let image: Sharp;
  if (isBmp(bytes)) {
    const { width, height, rgba } = await bmpPixels(bytes);
    image = sharp(rgba, { raw: { width, height, channels: 4 } });
  } else {
    image = sharp(bytes, { failOn: 'error' });
    // sharp reads what a file holds, whatever its name: a TIFF or an SVG named .png would be trained on
    const { format } = await image.metadata();
    if (!IMAGE_FORMATS.includes(format as string))
      throw new Error(`it holds a ${format ?? 'unknown'} image, not ${IMAGE_FORMAT_WORDS}`);
  }
  image = c === 1 ? image.removeAlpha().grayscale() : c === 3 ? image.removeAlpha() : image.ensureAlpha();
  if (c !== 1) image = image.toColourspace('srgb');
  const { data, info } = await image
    .resize(w, h, { fit: 'fill', kernel: 'linear' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== c || info.width !== w || info.height !== h || data.length !== h * w * c)
    throw new Error(`decoded to ${info.width}x${info.height}x${info.channels}, not ${w}x${h}x${c}`);
  return new Uint8Array(data.buffer, data.byteOffset, data.length);
}
