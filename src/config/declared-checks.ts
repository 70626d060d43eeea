/** The per-option checks of the declarations, run on the values a config gives (defaults are not checked). */
import type { TrainConfig } from '../config-types.js';
import { declaredOptions } from '../options/option-registry.js';

export function checkDeclared(config: TrainConfig): void {
  const given = config as Record<string, unknown>;
  for (const { key, into, declaration } of declaredOptions()) {
    if (into !== undefined || declaration.check === undefined || given[key] === undefined) continue;
    declaration.check(given[key], key);
  }
}
