/** A step's losses checked: a non-finite one fails the run (onNan 'error') or skips the step with a warning. */
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { optimizerNaNHint } from '../optim/tfjs-updates.js';
import type { TrainHooks } from './run-types.js';

/**
 * A non-finite loss: onNan 'error' fails the run naming the step and every such device; skip-step warns (every update
 * of the step is skipped).
 */
export function checkLoss(
  step: number,
  results: { device: number; nonFiniteLoss?: number }[],
  cfg: Pick<ResolvedConfig, 'onNan' | 'optimizer'>,
  hooks: TrainHooks,
): void {
  const bad = results.filter(r => r.nonFiniteLoss !== undefined);
  if (bad.length === 0) return;
  const where = bad.map(r => `device ${r.device} (${r.nonFiniteLoss})`).join(', ');
  if (cfg.onNan === 'error') {
    throw new TandemError(
      'NON_FINITE',
      `the loss is not finite in step ${step} on ${where}: the step was stopped before any gradient was ` +
        "handed over, so no parameter changed; lower the learning rate, check the inputs and the model's output " +
        "for an overflow, or use onNan: 'skip-step'" +
        optimizerNaNHint(cfg.optimizer),
      { device: bad[0].device, step, phase: 'forward' },
    );
  }
  hooks.onEvent?.({
    type: 'warning',
    step,
    message: `the loss is not finite on ${where}: every update of step ${step} is skipped`,
  });
}
