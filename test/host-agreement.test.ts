// Every option declares whether the hosts of a run must agree on it (`hosts: 'same'`, or `own: WHY`), and the flags
// the hosts compare at the rendezvous are derived from those declarations: an option added later cannot be missed (a
// declaration without the field does not compile; a `same` option no host reads fails here).
import t from 'tap';
import { resolveConfig } from '../src/config.js';
import { allOptions } from '../src/cli/train-flags.js';
import { sameOnEveryHost, type OptionDeclaration } from '../src/options/declaration.js';
import { declaredOptions, registerOptions } from '../src/options/option-registry.js';
import { comparison, flagDifferences, hostFlags } from '../src/world/host-flags.js';
import type { TrainConfig } from '../src/config-types.js';

const SMALL: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [8, 8, 1],
  classes: 4,
  datasetSize: 64,
  batch: 8,
  steps: 2,
  backend: 'cpu',
};

t.test('every option says whether every host must give it the same value, and why not when not', async t => {
  const options = allOptions();
  t.ok(options.length > 80, `${options.length} options`);
  for (const { option } of options) {
    const { hosts } = option.declaration;
    if (hosts !== 'same' && !/^own: \S.{9,}/.test(hosts)) t.fail(`${option.path}: hosts is ${JSON.stringify(hosts)}`);
  }
  const own = options.filter(o => !sameOnEveryHost(o.option.declaration)).map(o => o.option.path);
  for (const key of ['out', 'hostRank', 'checkpointDir', 'dashboard', 'nativeThreads', 'verbose'])
    t.ok(own.includes(key), `${key} may differ between hosts`);
  for (const key of ['precision', 'lr', 'momentum', 'batchNorm', 'onNan', 'accumulate', 'commHookOptions.rank'])
    t.notOk(own.includes(key), `${key} is the same on every host`);
});

t.test("hostFlags compares every 'same' option, by its resolved value", async t => {
  const flags = hostFlags(await resolveConfig(SMALL), false);
  const same = declaredOptions().filter(o => sameOnEveryHost(o.declaration));
  for (const option of same) {
    const how = comparison(option);
    if (!how) {
      t.fail(`${option.path} (${option.section}) is declared the same on every host, and host-flags.ts never reads it`);
      continue;
    }
    if (!(how.name in flags)) t.fail(`${option.path}: no host flag ${how.name}`);
  }
  const own = declaredOptions().filter(o => !sameOnEveryHost(o.declaration));
  for (const option of own) t.notOk(option.path in flags, `${option.path} (own) is not compared`);
  t.pass(`${same.length} options compared, ${own.length} left to each host`);
});

t.test("a plugin's option is compared as it declares, one without the field too", async t => {
  registerOptions({
    name: 'agreement test',
    table: {
      agreeSame: { kind: 'integer', group: 'plugin', hosts: 'same', doc: 'compared' },
      agreeOwn: { kind: 'integer', group: 'plugin', hosts: 'own: a test of an own option', doc: 'not compared' },
      // a JavaScript plugin's declaration from before the field: compared, the safe side
      agreeOld: { kind: 'integer', group: 'plugin', doc: 'compared' } as unknown as OptionDeclaration<unknown>,
    },
  });
  const flags = async (c: Record<string, number>) => hostFlags(await resolveConfig({ ...SMALL, ...c }), false);
  const base = await flags({ agreeSame: 1, agreeOwn: 1, agreeOld: 1 });
  t.same(flagDifferences(base, await flags({ agreeSame: 2, agreeOwn: 2, agreeOld: 2 }), 'here', 'there'), [
    'agreeSame: 1 here, 2 there',
    'agreeOld: 1 here, 2 there',
  ]);
});
