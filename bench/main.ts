/** `npm run bench -- NAME [--steps N] [--stock-steps N] [--batch N] [--out DIR]` */
import { parseArgs } from 'node:util';
import { runScaling } from './scaling.js';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { steps: { type: 'string' }, 'stock-steps': { type: 'string' }, batch: { type: 'string' }, out: { type: 'string' } },
});
const name = positionals[0] ?? 'scaling';
switch (name) {
  case 'scaling':
    await runScaling({
      steps: Number(values.steps ?? 60),
      stockSteps: Number(values['stock-steps'] ?? 2),
      perDeviceBatch: Number(values.batch ?? 32),
      out: values.out ?? 'bench/results',
    });
    break;
  default:
    console.error(`unknown bench '${name}'. Benches: scaling`);
    process.exitCode = 1;
}
