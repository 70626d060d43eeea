/** The `cpu` engine: tfjs's pure-JS cpu backend (the reference). */
import type { Engine } from '../engine.js';
import { JS_ARITHMETIC } from '../../optim/flat-arithmetic.js';

export const CPU_ENGINE: Engine = {
  name: 'cpu',
  description: "tfjs's pure-JavaScript cpu backend",
  capabilities: { synchronousReads: true, parameters: 'host', convInputGradientAsConvolution: true },
  unavailable: () => undefined,
  async start() {
    /* built into tfjs */
  },
  arithmetic: () => JS_ARITHMETIC,
  kernelSite: () => 'calling-thread',
};
