/**
 * The gradient of a nearest-neighbour resize (UpSampling2D, Resizing with
 * 'nearest') for the cpu-based engines. tfjs 4.22's cpu kernel
 * ResizeNearestNeighborGrad reads dy at the *image's* batch offset: every
 * sample after the first gets a wrong gradient (and a downsizing resize reads
 * past dy's end: NaN), so one engine's batch of B and N devices' batches of
 * B/N disagree. This kernel walks dy once and adds each value to the image
 * pixel the forward read it from (tfjs's own forward mapping, alignCorners and
 * halfPixelCenters included), in dy order per pixel, in float64, as tfjs sums. The wasm
 * engine's kernel is right and is kept.
 */
import type { Tf, TensorInfo } from './tfjs-types.js';
import { kernelOutput } from './kernel-output.js';
import { replaceKernel, type AnyKernel } from './replace-kernel.js';

export interface ResizeGeometry {
  batch: number;
  inHeight: number;
  inWidth: number;
  channels: number;
  outHeight: number;
  outWidth: number;
  alignCorners: boolean;
  halfPixelCenters: boolean;
}

/** The source index the forward resize reads for output index `i` (tfjs cpu ResizeNearestNeighbor's rule). */
function sourceIndex(i: number, inSize: number, outSize: number, g: ResizeGeometry): number {
  const ratio =
    (g.alignCorners && outSize > 1 ? inSize - 1 : inSize) / (g.alignCorners && outSize > 1 ? outSize - 1 : outSize);
  const frac = g.halfPixelCenters ? ratio * (i + 0.5) : ratio * i;
  const nearest = Math.min(inSize - 1, g.alignCorners ? Math.round(frac) : Math.floor(frac));
  return g.halfPixelCenters ? Math.max(0, nearest) : nearest;
}

/** dImages [b, h, w, c] from dy [b, oh, ow, c]. */
export function resizeNearestGradient(dy: ArrayLike<number>, g: ResizeGeometry): Float32Array {
  const dx = new Float64Array(g.batch * g.inHeight * g.inWidth * g.channels); // tfjs sums in float64, rounds once
  const rows = Array.from({ length: g.outHeight }, (_, r) => sourceIndex(r, g.inHeight, g.outHeight, g));
  const cols = Array.from({ length: g.outWidth }, (_, c) => sourceIndex(c, g.inWidth, g.outWidth, g));
  let at = 0;
  for (let b = 0; b < g.batch; b++) {
    for (let r = 0; r < g.outHeight; r++) {
      const row = (b * g.inHeight + rows[r]) * g.inWidth;
      for (let c = 0; c < g.outWidth; c++) {
        const base = (row + cols[c]) * g.channels;
        for (let d = 0; d < g.channels; d++) dx[base + d] += dy[at++];
      }
    }
  }
  return Float32Array.from(dx);
}

/** Replaces `backendName`'s ResizeNearestNeighborGrad by the kernel above. */
export function registerResizeNearestGradient(tf: Tf, backendName: string): void {
  const name = 'ResizeNearestNeighborGrad';
  const cpuOnly: AnyKernel = () => {
    throw new Error(`tandem: ${name} on ${backendName} has no fallback`);
  };
  replaceKernel(tf, backendName, name, cpuOnly, raw => {
    const args = raw as {
      inputs: Record<string, TensorInfo>;
      backend: { readSync(id: unknown): unknown };
      attrs: Record<string, unknown>;
    };
    const { images, dy } = args.inputs;
    const [batch, inHeight, inWidth, channels] = images.shape;
    const g: ResizeGeometry = {
      batch,
      inHeight,
      inWidth,
      channels,
      outHeight: dy.shape[1],
      outWidth: dy.shape[2],
      alignCorners: args.attrs.alignCorners === true,
      halfPixelCenters: args.attrs.halfPixelCenters === true,
    };
    const dx = resizeNearestGradient(args.backend.readSync(dy.dataId) as Float32Array, g);
    return kernelOutput(backendName, args.backend, [...images.shape], 'float32', dx);
  });
}
