/**
 * The fp16 and bf16 hooks (DDP's fp16_compress_hook / bf16_compress_hook,
 * with error feedback): each rank rounds its gradient (plus the residual it
 * kept) to 16 bits, packs two codes per float32 word and all-gathers the
 * packed words — half the floats of its gradient cross the link; every rank
 * then decodes every rank's part and sums them in rank order, in float32, and
 * divides by the ranks, as the all-reduce does: the same bits on every rank,
 * and exactly the all-reduce's mean when every value is representable.
 * Error feedback: the residual (gradient + last residual − what was sent) is
 * kept per rank and added to the next step's gradient, so over the steps
 * nothing is lost; a non-finite value leaves no residual.
 */
import type { Collective } from '../../collectives/collective.js';
import type { BucketInfo, CommHook, CommHookOptions, GradBucket } from '../comm-hook.js';
import { addDecoded, decodeTable, encodeHalves, packedWords, type HalfFormat } from './half-float.js';

export interface CompressState {
  /** What was not sent yet (per rank); undefined without error feedback. */
  readonly residual?: Float32Array;
  /** The gradient plus the residual, then what its codes decode to. */
  readonly corrected: Float32Array;
  readonly sent: Float32Array;
  readonly packed: Float32Array;
  readonly gathered: Float32Array;
}

export function compressHook(format: HalfFormat): CommHook<CompressState> {
  return {
    name: format,
    description: `${format === 'fp16' ? 'IEEE half' : 'bfloat16'} compression: 16 bits per value cross the link (all-gather), with error feedback`,
    init: (info: BucketInfo, options: CommHookOptions): CompressState => {
      const words = packedWords(info.length);
      return {
        residual: options.errorFeedback ? new Float32Array(info.length) : undefined,
        corrected: new Float32Array(info.length),
        sent: new Float32Array(info.length),
        packed: new Float32Array(words),
        gathered: new Float32Array(words * info.size),
      };
    },
    exchange: (bucket: GradBucket, state: CompressState, collective: Collective) => exchangeHalves(format, bucket, state, collective),
    stateArrays: (state: CompressState) => state.residual ? [state.residual] : [],
  };
}

async function exchangeHalves(format: HalfFormat, bucket: GradBucket, state: CompressState, collective: Collective): Promise<void> {
  const { buffer, size } = bucket;
  const { residual, corrected, sent, packed, gathered } = state;
  compressWithFeedback(format, buffer, residual, corrected, sent, packed);
  await collective.allGather(packed, gathered);
  const words = packed.length;
  const decode = decodeTable(format);
  const first = new Uint16Array(gathered.buffer, gathered.byteOffset, buffer.length);
  for (let i = 0; i < buffer.length; i++) buffer[i] = decode[first[i]];
  for (let r = 1; r < size; r++) addDecoded(format, gathered.subarray(r * words, (r + 1) * words), buffer);
  if (size > 1) for (let i = 0; i < buffer.length; i++) buffer[i] /= size;
}

/**
 * `packed` = the codes of gradient + residual; `sent` = what they decode to; the residual becomes
 * gradient + residual − sent (0 where either is not finite). Without a residual, the gradient alone.
 */
export function compressWithFeedback(format: HalfFormat, gradient: Float32Array, residual: Float32Array | undefined,
  corrected: Float32Array, sent: Float32Array, packed: Float32Array): void {
  if (!residual) { encodeHalves(format, gradient, packed, sent); return; }
  for (let i = 0; i < gradient.length; i++) corrected[i] = gradient[i] + residual[i];
  encodeHalves(format, corrected, packed, sent);
  for (let i = 0; i < gradient.length; i++) {
    const left = corrected[i] - sent[i];
    residual[i] = Number.isFinite(left) ? left : 0;
  }
}
