// --min-hosts is refused before any thread starts where an elastic run cannot keep its promise, each refusal naming
// the reason and the fix; a config it accepts resolves to the elasticity asked for.
import t from 'tap';
import { resolveConfig } from '../src/config.js';
import { elasticOf } from '../src/world/elastic-config.js';
import type { TrainConfig } from '../src/config-types.js';

const BASE: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [8, 8, 1],
  classes: 4,
  datasetSize: 96,
  batch: 12,
  steps: 2,
  devices: 1,
  hosts: 3,
  hostRank: 1,
  rendezvous: '10.0.0.1:29500',
  transport: 'gloo',
  minHosts: 2,
};

async function elasticity(config: TrainConfig) {
  return elasticOf(config, await resolveConfig(config));
}

t.test('accepted: data-parallel over gloo, a batch every remaining device count divides', async t => {
  t.same(await elasticity(BASE), { minHosts: 2 });
  t.same(await elasticity({ ...BASE, minHosts: undefined }), undefined, 'absent: not elastic');
});

const refusals: [string, TrainConfig, RegExp][] = [
  ['more than --hosts', { ...BASE, minHosts: 4 }, /4 is more than the 3 hosts/],
  ['local-head', { ...BASE, classes: 6, method: 'local-head' }, /method 'local-head' owns labels per device/],
  ['partial-fc', { ...BASE, method: 'partial-fc' }, /method 'partial-fc' owns labels per device/],
  ['a comm hook', { ...BASE, commHook: 'fp16' }, /communication hook 'fp16' keeps state per rank/],
  ['the shm transport', { ...BASE, transport: 'shm' }, /transport 'shm' cannot be re-formed.*--transport gloo/],
  ['a batch 2 hosts cannot split', { ...BASE, batch: 9 }, /global batch 9 does not split evenly over the 2 devices/],
];
for (const [what, config, message] of refusals) {
  t.test(`refused: ${what}`, async t => {
    await t.rejects(elasticity(config), { name: 'TandemError', code: 'BAD_CONFIG', message });
  });
}
