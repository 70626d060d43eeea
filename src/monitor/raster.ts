/**
 * A small RGBA raster for drawing pictures without a canvas dependency:
 * filled rectangles, and text in the built-in bitmap font. The pixels are
 * laid out as PNG (pngjs) expects them: rows top to bottom, four bytes each.
 */
import { GLYPH_ADVANCE, GLYPH_DESCENT, GLYPH_HEIGHT, GLYPH_WIDTH, glyphPixel, textWidth } from './bitmap-font.js';

export type TextAnchor = 'start' | 'middle' | 'end';

export interface Raster {
  readonly width: number;
  readonly height: number;
  /** width × height × 4 bytes, RGBA. */
  readonly data: Uint8Array;
}

export function createRaster(width: number, height: number, background = '#ffffff'): Raster {
  const raster = { width, height, data: new Uint8Array(width * height * 4) };
  fillRect(raster, 0, 0, width, height, background);
  return raster;
}

/** `#rrggbb` as [r, g, b]. */
export function rgbOf(hex: string): [number, number, number] {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!m) throw new RangeError(`colour ${hex}: expected #rrggbb`);
  return [parseInt(m[1], 16), parseInt(m[2], 16), parseInt(m[3], 16)];
}

function setPixel(raster: Raster, x: number, y: number, [r, g, b]: readonly number[]): void {
  if (x < 0 || y < 0 || x >= raster.width || y >= raster.height) return;
  const i = (y * raster.width + x) * 4;
  raster.data[i] = r;
  raster.data[i + 1] = g;
  raster.data[i + 2] = b;
  raster.data[i + 3] = 255;
}

/**
 * Fills the pixels whose area meets [x0, x1) × [y0, y1), clipped to the raster;
 * a rectangle thinner than a pixel still fills one column (a short span stays visible).
 */
export function fillRect(raster: Raster, x0: number, y0: number, x1: number, y1: number, hex: string): void {
  const rgb = rgbOf(hex);
  const left = Math.floor(x0),
    right = Math.max(left + 1, Math.ceil(x1));
  const top = Math.floor(y0),
    bottom = Math.max(top + 1, Math.ceil(y1));
  for (let y = Math.max(0, top); y < Math.min(raster.height, bottom); y++) {
    for (let x = Math.max(0, left); x < Math.min(raster.width, right); x++) setPixel(raster, x, y, rgb);
  }
}

/**
 * Draws `text` with its baseline at `baseline` (the glyphs sit on it, as SVG
 * text sits on its y; descenders go one row below) and `x` its start, middle or end; each
 * font pixel a `scale` × `scale` square. Returns the left edge used.
 */
export function drawText(
  raster: Raster,
  text: string,
  x: number,
  baseline: number,
  hex: string,
  scale = 1,
  anchor: TextAnchor = 'start',
): number {
  const rgb = rgbOf(hex),
    width = textWidth(text, scale);
  const left = Math.round(anchor === 'start' ? x : anchor === 'middle' ? x - width / 2 : x - width);
  const top = Math.round(baseline) - GLYPH_HEIGHT * scale;
  for (let c = 0; c < text.length; c++) {
    for (let column = 0; column < GLYPH_WIDTH; column++) {
      for (let row = 0; row < GLYPH_HEIGHT + GLYPH_DESCENT; row++) {
        if (!glyphPixel(text[c], column, row)) continue;
        const px = left + (c * GLYPH_ADVANCE + column) * scale,
          py = top + row * scale;
        for (let dy = 0; dy < scale; dy++) for (let dx = 0; dx < scale; dx++) setPixel(raster, px + dx, py + dy, rgb);
      }
    }
  }
  return left;
}
