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
 * The per-element passes run in the native addon when it loads (the same
 * bits; optim/half-arithmetic.ts), in JavaScript otherwise.
 */
import type { Collective } from '../../collectives/collective.js';
import type { BucketInfo, CommHook, CommHookOptions, GradBucket } from '../comm-hook.js';
import { packedWords, type HalfFormat } from './half-float.js';
import { halfArithmetic, type HalfArithmeticChoice } from '../../optim/half-arithmetic.js';

export { compressWithFeedback } from './half-float.js';

export interface CompressState {
  /** What was not sent yet (per rank); undefined without error feedback. */
  readonly residual?: Float32Array;
  /** The gradient plus the residual, then what its codes decode to. */
  readonly corrected: Float32Array;
  readonly sent: Float32Array;
  readonly packed: Float32Array;
  readonly gathered: Float32Array;
}

/** `arithmetic`: who does the per-element passes ('auto': the native addon when it loads, else JS). */
export function compressHook(format: HalfFormat, arithmetic: HalfArithmeticChoice = 'auto'): CommHook<CompressState> {
  return {
    name: format,
    description:
      `${format === 'fp16' ? 'IEEE half' : 'bfloat16'} compression: 16 bits per value cross the link ` +
      `(all-gather), with error feedback`,
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
    exchange: (bucket: GradBucket, state: CompressState, collective: Collective) =>
      exchangeHalves(format, arithmetic, bucket, state, collective),
    stateArrays: (state: CompressState) => (state.residual ? [state.residual] : []),
  };
}

async function exchangeHalves(
  format: HalfFormat,
  choice: HalfArithmeticChoice,
  bucket: GradBucket,
  state: CompressState,
  collective: Collective,
): Promise<void> {
  const arithmetic = halfArithmetic(choice);
  const { residual, corrected, sent, packed, gathered } = state;
  arithmetic.compress(format, bucket.buffer, residual, corrected, sent, packed);
  await collective.allGather(packed, gathered);
  arithmetic.meanDecoded(format, gathered, bucket.size, bucket.buffer);
}
