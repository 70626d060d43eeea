/** The engine section of a train config: what the devices compute on. */
import type { OptionTable } from '../options/declaration.js';
import { positiveInt, trueOrFalse } from '../options/option-checks.js';

/** The built-in engines. */
export const BACKENDS = ['native', 'wasm', 'cpu', 'tensorflow', 'webgpu'] as const;
/** What convolutions and matmuls multiply in. */
export const PRECISIONS = ['fp32', 'bf16'] as const;
export type Precision = (typeof PRECISIONS)[number];

/** A built-in engine's name, or a registered plugin engine's. */
export type BackendName = (typeof BACKENDS)[number] | (string & {});

export interface EngineOptions {
  /** Default: `native` when the oneDNN addon was built, else `wasm` (env `TANDEM_BACKEND` overrides the default). */
  backend?: BackendName;
  /** OpenMP threads per device for the native backend. Default 1 (one core per device). */
  nativeThreads?: number;
  /**
   * Native backend: run each Conv2D layer (relu or linear, channels-last, dilation 1) as one fused
   * kernel — convolution + bias + activation — in training. Default true (`--no-native-fusion` turns it off).
   */
  nativeFusion?: boolean;
  /**
   * `bf16`: Conv2D, depthwise and MatMul (forward and both gradients) multiply in bfloat16 with float32 accumulation,
   * as PyTorch's autocast; weights, optimizer state, the update, BatchNormalization, softmax and losses stay float32.
   * Native engine on a CPU with AMX-BF16 or AVX512-BF16. Default `fp32`.
   */
  precision?: Precision;
}

export const ENGINE_OPTIONS: OptionTable<EngineOptions> = {
  backend: {
    kind: 'string',
    group: 'engine',
    hosts: 'same',
    choices: BACKENDS,
    default: 'native when the addon was built, else wasm (env TANDEM_BACKEND)',
    doc: 'the engine every device computes on (or one a plugin registers)',
  },
  nativeThreads: {
    kind: 'integer',
    group: 'engine',
    hosts: "own: this machine's cores",
    default: '1',
    doc: 'native: OpenMP threads per device',
    check: positiveInt(256),
  },
  precision: {
    kind: 'string',
    group: 'engine',
    hosts: 'same',
    choices: PRECISIONS,
    default: 'fp32',
    doc: 'native: bf16 multiplies convolutions and matmuls in bfloat16 (float32 accumulation, weights and update)',
  },
  nativeFusion: {
    kind: 'negated',
    group: 'engine',
    hosts: 'same',
    default: 'true',
    doc: 'native: each Conv2D as one fused kernel (convolution + bias + activation)',
    check: trueOrFalse,
  },
};
