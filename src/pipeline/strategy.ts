/**
 * Gradient-exchange strategies: how the gradients of one backward pass are
 * grouped, handed to the comm side and applied. This issue ships `sequential`
 * (all gradients, then all exchanges, then the update); the overlapped
 * strategies plug in here as further groupings of the parameter layout.
 */
import type { ParameterGroup, ParameterLayout } from '../model/parameter-layout.js';

export const STRATEGIES = ['sequential'] as const;
export type StrategyName = (typeof STRATEGIES)[number];

/** The exchange groups of `layout` under `strategy`, in the order they are exchanged. */
export function exchangeGroups(strategy: StrategyName, layout: ParameterLayout): ParameterGroup[] {
  switch (strategy) {
    case 'sequential':
      return [{ name: 'all', start: 0, end: layout.total }];
    default: {
      const never: never = strategy;
      throw new Error(`unknown strategy ${String(never)}`);
    }
  }
}
