/**
 * A BMP file's pixels as RGBA bytes, for sharp to resize (libvips' prebuilt binaries cannot read BMP; Keras'
 * `image_dataset_from_directory` takes it). bmp-ts (jimp's BMP decoder) decodes every bit depth (1, 4, 8, 16, 24, 32),
 * RLE4, RLE8 and bit fields; what it writes is ABGR, turned here into RGBA. A file of no alpha (a palette, 24 bits,
 * 16 or 32 bits without an alpha mask) is opaque.
 *
 * The header is checked before anything is decoded: its size against sharp's own pixel limit, and an uncompressed
 * image's rows against the file's length, so a small file cannot make the decoder allocate a large image (an RLE
 * image may hold at most 255 pixels in every 2 bytes).
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
/** BI_RGB, BI_RLE8, BI_RLE4, BI_BITFIELDS, BI_ALPHABITFIELDS. */
const COMPRESSIONS = [0, RLE8, RLE4, 3, 6];
const BIT_DEPTHS = [1, 4, 8, 16, 24, 32];

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
  return { width, height, bitPP, compression };
}

/** bmp-ts's pixels; its failure (pixels cut short, a palette index past the palette) said as the file's. */
function decoded(decode: Decode, bytes: Buffer): Buffer {
  try {
    return decode(bytes).data;
  } catch (e) {
    throw new Error(`its pixels do not read as its header says (bmp-ts: ${(e as Error).message})`);
  }
}

/**
 * bmp-ts's ABGR pixels of the file. Its 4-bit rows stop at an odd width's last pixel and leave the other rows blank;
 * such a row is stored in the bytes of one pixel more, so the file is decoded at the even width and the extra column
 * dropped.
 */
function abgrOf(decode: Decode, bytes: Buffer, { width, height, bitPP, compression }: BmpHeader): Buffer {
  const widened = bitPP === 4 && compression === 0 && width % 2 === 1;
  if (!widened) return decoded(decode, bytes);
  const copy = Buffer.from(bytes);
  copy.writeInt32LE(width + 1, 18);
  const wide = decoded(decode, copy);
  const out = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) wide.copy(out, y * width * 4, y * (width + 1) * 4, (y * (width + 1) + width) * 4);
  return out;
}

/** The pixels of a BMP file's bytes; throws an Error naming what is wrong with a file that is not a readable BMP. */
export async function bmpPixels(bytes: Buffer): Promise<Pixels> {
  if (!isBmp(bytes)) throw new Error('not a BMP file (no "BM" at its start)');
  const header = checkedHeader(bytes);
  const { width, height, bitPP } = header;
  const abgr = abgrOf(await bmpDecode(), bytes, header);
  if (abgr.length !== width * height * 4)
    throw new Error(`the BMP decoder gave ${abgr.length} bytes for the header's ${width}x${height} pixels`);
  const hasAlpha = bitPP === 16 || bitPP === 32; // bmp-ts gives 255 where such a file has no alpha mask
  const rgba = Buffer.allocUnsafe(abgr.length);
  for (let p = 0; p < abgr.length; p += 4) {
    rgba[p] = abgr[p + 3];
    rgba[p + 1] = abgr[p + 2];
    rgba[p + 2] = abgr[p + 1];
    rgba[p + 3] = hasAlpha ? abgr[p] : 255;
  }
  return { width, height, rgba };
}
