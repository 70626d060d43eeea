/** What an optimizer's own rule adds to a non-finite loss or gradient's message (optimizers/rmsprop.ts). */
import { optimizerOfKind } from './optimizer-registry.js';
export { TFJS_EPSILON } from './optimizers/common.js';

/** '' unless the optimizer's own rule is the likely cause (tfjs's centered rmsprop). */
export function optimizerNaNHint(config: { kind: string; centered?: boolean }): string {
  return optimizerOfKind(config.kind).nanHint?.(config as never) ?? '';
}
