/**
 * The registry of training methods (tfjs-core's registry habit: config
 * objects by name, duplicates refused). data-parallel, local-head and
 * partial-fc are built in; others register from a plugin module.
 */
import { TandemError } from '../errors.js';
import type { TrainingMethod } from './training-method.js';
import { DATA_PARALLEL } from './data-parallel.js';
import { LOCAL_HEAD, PARTIAL_FC } from './classifier-methods.js';

const methods = new Map<string, TrainingMethod>([DATA_PARALLEL, LOCAL_HEAD, PARTIAL_FC].map(m => [m.name, m]));

export function registerMethod(method: TrainingMethod): void {
  if (methods.has(method.name)) throw new TandemError('BAD_CONFIG', `a training method named '${method.name}' is already registered; give yours another name`);
  methods.set(method.name, method);
}

export function methodNames(): string[] {
  return [...methods.keys()];
}

export function getMethod(name: string): TrainingMethod {
  const m = methods.get(name);
  if (!m) {
    throw new TandemError('BAD_CONFIG', `config.method: must be one of ${methodNames().join(', ')}, got ${JSON.stringify(name)} ` +
      '(a plugin module that registers another method must be listed in `plugins`)');
  }
  return m;
}
