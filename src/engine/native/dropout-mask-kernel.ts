/** Dropout's multiplier as the native backend's kernel (../dropout-kernel.ts): the addon's loop into a pooled array. */
import type { NativeKernel, NativeKernelContext } from './native-kernel.js';
import { output, overwrittenOutput, sizeOf } from './native-kernel.js';
import { DROPOUT_MASK_KERNEL, dropoutThreshold, maskBase, seedOf } from '../dropout-kernel.js';

export function dropoutMaskKernel({ addon }: NativeKernelContext): NativeKernel {
  return {
    kernelName: DROPOUT_MASK_KERNEL,
    run({ attrs, backend }) {
      const shape = attrs.shape as number[];
      const { kept, lo } = dropoutThreshold(attrs.rate as number);
      const values = overwrittenOutput(sizeOf(shape));
      addon.dropoutMask(values, maskBase(seedOf(attrs.source as number)), lo, kept);
      return output(backend, shape, values);
    },
  };
}
