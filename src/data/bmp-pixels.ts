/**
 * A BMP file's pixels as RGBA bytes, for sharp to resize (libvips' prebuilt binaries cannot read BMP; Keras'
 * `image_dataset_from_directory` takes it). bmp-ts (jimp's BMP decoder) decodes every bit depth (1, 4, 8, 16, 24, 32),
 * RLE4, RLE8 and bit fields; what it writes is ABGR, turned here into RGBA. A file of no alpha (a palette, 24 bits,
 * 16 or 32 bits without an alpha mask) is opaque.
 *
 * Where bmp-ts departs from the format, the file is read as the format (and Pillow) reads it:
 * - the pixels start where the file header says (bmp-ts reads them right after the palette, so a gap before them, as
 *   some writers leave, shifted the image): the copy it decodes has them there;
 * - 16 and 32 bits without bit fields (BI_RGB) take the default masks (5-5-5, 8-8-8, no alpha) whatever a large
 *   header's mask fields hold (bmp-ts read them, and a header that leaves them 0 gave a black image);
 * - a channel of n < 8 bits is read to the full range as Pillow reads it, ⌊v · 255 / (2^n − 1)⌋ (bmp-ts gave
 *   v · 2^(8−n): 5 bits' 31 was 248, a 1-bit alpha's 1 was 128); a channel wider than 8 bits gives its top 8.
 *
 * The header is checked before anything is decoded: its size against sharp's own pixel limit, and an uncompressed
 * image's rows against the file's length, so a small file cannot make the decoder allocate a large image (an RLE
 * image may hold at most 255 pixels in every 2 bytes); the masks are each one run of bits, a colour's not empty.
 */
type Decode = (typeof import('bmp-ts'))['decode'];

let decoder: Promise<Decode> | undefined;
/** bmp-ts, imported when a BMP file is first decoded (as sharp is: a run of no image folder never loads it). */
const bmpDecode = (): Promise<Decode> => (decoder ??= import('bmp-ts').then(m => m.decode));

/** sharp's default `limitInputPixels`: what it would refuse in any other format. */
export const MAX_IMAGE_PIXELS = 0x3fff * 0x3fff;
const BMP_MAGIC = 0x4d42; // 'BM', little-endian
const INFO_HEADER_END = 54; // the file header (14) and BITMAPINFOHEADER (40)
const RLE8 = 1;
const RLE4 = 2;
const BITFIELDS = 3;
const ALPHABITFIELDS = 6;
/** BI_RGB, BI_RLE8, BI_RLE4, BI_BITFIELDS, BI_ALPHABITFIELDS. */
const COMPRESSIONS = [0, RLE8, RLE4, BITFIELDS, ALPHABITFIELDS];
const BIT_DEPTHS = [1, 4, 8, 16, 24, 32];
/** Red, green, blue and alpha masks of BI_RGB's pixels at 16 and 32 bits. */
const DEFAULT_MASKS: Readonly<Record<number, readonly number[]>> = {
  16: [0x7c00, 0x03e0, 0x001f, 0],
  32: [0xff0000, 0xff00, 0xff, 0],
};
const MASK_AT = 54; // the first mask: after a 40-byte header, or inside a larger one
const CHANNELS = ['red', 'green', 'blue', 'alpha'];

export interface Pixels {
  width: number;
  height: number;
  /** width × height × 4 bytes, row-major from the top row, RGBA. */
  rgba: Buffer;
}

export function isBmp(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] + (bytes[1] << 8) === BMP_MAGIC;
}

interface BmpHeader {
  width: number;
  height: number;
  bitPP: number;
  compression: number;
  /** The info header's size (40, 52, 56, 108, 124). */
  infoSize: number;
  /** Where the pixels start, as the file header says. */
  offset: number;
  /** 16 and 32 bits: the red, green, blue and alpha masks the format gives the file (alpha 0: none). */
  masks?: number[];
}

/** The size the header declares, refused (an Error saying why) when the file cannot hold it. */
function checkedHeader(bytes: Buffer): BmpHeader {
  if (bytes.length < INFO_HEADER_END) throw new Error(`a BMP file of ${bytes.length} bytes is shorter than its header`);
  const width = bytes.readInt32LE(18);
  const height = Math.abs(bytes.readInt32LE(22)); // negative: rows stored from the top
  const bitPP = bytes.readUInt16LE(28);
  const compression = bytes.readUInt32LE(30);
  if (width <= 0 || height === 0) throw new Error(`a BMP image of ${width}x${height} pixels`);
  if (width * height > MAX_IMAGE_PIXELS)
    throw new Error(`a BMP image of ${width}x${height} pixels, more than ${MAX_IMAGE_PIXELS} (sharp's limit)`);
  if (!BIT_DEPTHS.includes(bitPP)) throw new Error(`a BMP image of ${bitPP} bits a pixel (1, 4, 8, 16, 24 or 32 read)`);
  if (!COMPRESSIONS.includes(compression))
    throw new Error(`a BMP image of compression ${compression} (an embedded JPEG or PNG is not read)`);
  const rle = compression === RLE8 || compression === RLE4;
  const bound = rle ? (bytes.length * 255) / 2 : (bytes.length * 8) / bitPP;
  if (width * height > bound)
    throw new Error(
      `a BMP file of ${bytes.length} bytes cannot hold the ${width}x${height} pixels its header declares`,
    );
  const infoSize = bytes.readUInt32LE(14);
  const offset = bytes.readUInt32LE(10);
  if (offset < 14 + infoSize || offset > bytes.length)
    throw new Error(`its pixels start at byte ${offset}, outside the ${bytes.length} bytes after its header`);
  return { width, height, bitPP, compression, infoSize, offset, masks: masksOf(bytes, bitPP, compression, infoSize) };
}

/** The masks of a file of 16 or 32 bits, each checked to be one run of bits inside the pixel (a colour's not 0). */
function masksOf(bytes: Buffer, bitPP: number, compression: number, infoSize: number): number[] | undefined {
  const fields = compression === BITFIELDS || compression === ALPHABITFIELDS;
  if (bitPP !== 16 && bitPP !== 32) {
    if (fields) throw new Error(`a BMP image of bit fields at ${bitPP} bits a pixel (16 or 32 read)`);
    return undefined;
  }
  if (!fields) return [...DEFAULT_MASKS[bitPP]];
  const count = compression === ALPHABITFIELDS || infoSize >= 56 ? 4 : 3;
  if (bytes.length < MASK_AT + count * 4) throw new Error('a BMP file that ends inside its bit masks');
  const masks = [0, 1, 2, 3].map(i => (i < count ? bytes.readUInt32LE(MASK_AT + i * 4) : 0));
  masks.forEach((mask, c) => {
    const { shift, bits } = runOf(mask);
    if ((mask === 0 && c < 3) || mask !== (2 ** bits - 1) * 2 ** shift || mask >= 2 ** bitPP)
      throw new Error(`a BMP image whose ${CHANNELS[c]} mask 0x${mask.toString(16)} is not one run of its bits`);
  });
  return masks;
}

/** Where a mask's lowest run of bits starts, and how many bits it holds (numbers: a mask may use bit 31). */
function runOf(mask: number): { shift: number; bits: number } {
  if (mask === 0) return { shift: 0, bits: 0 };
  const bit = (k: number) => Math.floor(mask / 2 ** k) % 2;
  let shift = 0;
  while (bit(shift) === 0) shift++;
  let bits = 0;
  while (shift + bits < 32 && bit(shift + bits) === 1) bits++;
  return { shift, bits };
}

/** bmp-ts's pixels; its failure (pixels cut short, a palette index past the palette) said as the file's. */
function decoded(decode: Decode, bytes: Buffer): Buffer {
  try {
    return decode(bytes).data;
  } catch (e) {
    throw new Error(`its pixels do not read as its header says (bmp-ts: ${(e as Error).message})`);
  }
}

/** Where bmp-ts starts to read the pixels: after the headers, the masks it reads after them and the palette. */
function decoderStart(bytes: Buffer, { infoSize, compression, bitPP }: BmpHeader): number {
  const fields = compression === BITFIELDS ? 12 : compression === ALPHABITFIELDS ? 16 : 0;
  const after = infoSize === 40 ? fields : infoSize === 52 && compression === ALPHABITFIELDS ? 4 : 0;
  const colors = bytes.readUInt32LE(46);
  const entries = bitPP <= 8 || colors > 0 ? (colors === 0 ? 2 ** bitPP : colors) : 0;
  return 14 + infoSize + after + entries * 4;
}

/**
 * The file as bmp-ts must be given it: its pixels where bmp-ts reads them, BI_RGB's masks the default ones; `bytes`
 * itself where that is what they are already, else a copy.
 */
function asDecoderReads(bytes: Buffer, header: BmpHeader): Buffer {
  const start = decoderStart(bytes, header);
  if (start > bytes.length) throw new Error(`a BMP file of ${bytes.length} bytes that ends inside its palette`);
  const { offset, compression, masks, infoSize } = header;
  // BI_RGB's mask fields inside a header larger than 40 bytes, which bmp-ts reads
  const fields = compression === 0 && masks ? masks.filter((_, i) => MASK_AT + i * 4 + 4 <= 14 + infoSize) : [];
  if (start === offset && fields.length === 0) return bytes;
  const copy =
    start === offset ? Buffer.from(bytes) : Buffer.concat([bytes.subarray(0, start), bytes.subarray(offset)]);
  fields.forEach((m, i) => copy.writeUInt32LE(m, MASK_AT + i * 4));
  return copy;
}

/**
 * bmp-ts's ABGR pixels of the file. Its 4-bit rows stop at an odd width's last pixel and leave the other rows blank;
 * such a row is stored in the bytes of one pixel more, so the file is decoded at the even width and the extra column
 * dropped.
 */
function abgrOf(decode: Decode, bytes: Buffer, header: BmpHeader): Buffer {
  const { width, height, bitPP, compression } = header;
  const readable = asDecoderReads(bytes, header);
  const widened = bitPP === 4 && compression === 0 && width % 2 === 1;
  if (!widened) return decoded(decode, readable);
  const file = readable === bytes ? Buffer.from(bytes) : readable; // the caller's bytes are not written
  file.writeInt32LE(width + 1, 18);
  const wide = decoded(decode, file);
  const out = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) wide.copy(out, y * width * 4, y * (width + 1) * 4, (y * (width + 1) + width) * 4);
  return out;
}

/**
 * A channel of `mask` as bmp-ts gives it (v · 2^(8−n) for n < 8 bits) read to the full range, ⌊v · 255 / (2^n − 1)⌋;
 * undefined where bmp-ts's value stands (8 bits or more).
 */
function fullRange(mask: number): Uint8Array | undefined {
  const { bits } = runOf(mask);
  if (bits === 0 || bits >= 8) return undefined;
  return Uint8Array.from({ length: 256 }, (_, b) => Math.floor(((b >> (8 - bits)) * 255) / (2 ** bits - 1)));
}

/** The pixels of a BMP file's bytes; throws an Error naming what is wrong with a file that is not a readable BMP. */
export async function bmpPixels(bytes: Buffer): Promise<Pixels> {
  if (!isBmp(bytes)) throw new Error('not a BMP file (no "BM" at its start)');
  const header = checkedHeader(bytes);
  const { width, height, masks = [] } = header;
  const abgr = abgrOf(await bmpDecode(), bytes, header);
  if (abgr.length !== width * height * 4)
    throw new Error(`the BMP decoder gave ${abgr.length} bytes for the header's ${width}x${height} pixels`);
  const [r, g, b, a] = [0, 1, 2, 3].map(c => fullRange(masks[c] ?? 0));
  const opaque = (masks[3] ?? 0) === 0;
  const rgba = Buffer.allocUnsafe(abgr.length);
  for (let p = 0; p < abgr.length; p += 4) {
    rgba[p] = r ? r[abgr[p + 3]] : abgr[p + 3];
    rgba[p + 1] = g ? g[abgr[p + 2]] : abgr[p + 2];
    rgba[p + 2] = b ? b[abgr[p + 1]] : abgr[p + 1];
    rgba[p + 3] = opaque ? 255 : a ? a[abgr[p]] : abgr[p];
  }
  return { width, height, rgba };
}
