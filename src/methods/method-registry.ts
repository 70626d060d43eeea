/**
 * The registry of training methods: data-parallel, local-head and partial-fc
 * are built in; others register from a plugin module.
 */
import { TandemError } from '../errors.js';
import { NamedRegistry } from '../named-registry.js';
import type { TrainingMethod } from './training-method.js';
import { DATA_PARALLEL } from './data-parallel.js';
import { LOCAL_HEAD, PARTIAL_FC } from './classifier-methods.js';

const methods = new NamedRegistry<TrainingMethod>(
  'training method',
  [DATA_PARALLEL, LOCAL_HEAD, PARTIAL_FC],
  (name, known) =>
    new TandemError(
      'BAD_CONFIG',
      `config.method: must be one of ${known.join(', ')}, got ${JSON.stringify(name)} ` +
        '(a plugin module that registers another method must be listed in `plugins`)',
    ),
);

export function registerMethod(method: TrainingMethod): void {
  methods.register(method);
}
export function methodNames(): string[] {
  return methods.names();
}
export function getMethod(name: string): TrainingMethod {
  return methods.get(name);
}
