// The optimizer registry: every built-in optimizer is one file whose declarations the rest is generated from. A
// plugin's optimizer, registered the same way, is resolved, refused where it should be, updated, and listed in the
// optimizer option table with its own options; a duplicate name is refused; each built-in's declared options are
// exactly what resolveOptimizer accepts for it (one given that it does not declare is refused, naming who takes it).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { defineOptimizer, flag, real } from '../src/optim/optimizer-definition.js';
import { getOptimizer, optimizerNames, registerOptimizer } from '../src/optim/optimizer-registry.js';
import { optimizerKeys, resolveOptimizer, type OptimizerFields } from '../src/optim/resolve-optimizer.js';
import { optimizerOptionTable } from '../src/optim/optimizer-options.js';
import { applyUpdate, optimizerStateSlots, type OptimizerConfig } from '../src/optim/flat-optimizer.js';
import { BUILTIN_OPTIMIZERS } from '../src/optim/optimizers/index.js';
import { TandemError } from '../src/errors.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { helpText } from '../src/cli/help-text.js';
import { resolveConfig, type TrainConfig } from '../src/config.js';

const builtins = BUILTIN_OPTIMIZERS.map(o => o.name);

t.test('each built-in takes exactly the options its file declares', async t => {
  const keys = [...optimizerKeys()].filter(k => k !== 'optimizer' && k !== 'lr');
  for (const name of builtins) {
    const own = Object.keys(getOptimizer(name).options);
    const resolved = resolveOptimizer({ optimizer: name } as OptimizerFields) as Record<string, unknown>;
    for (const key of own) {
      if (getOptimizer(name).options[key].omitAtFallback) continue;
      t.ok(key in resolved, `${name}: ${key} resolved (default ${String(resolved[key])})`);
    }
    for (const key of keys.filter(k => !own.includes(k))) {
      const value = getOptimizer(optimizerNames().find(n => key in getOptimizer(n).options)!).options[key].kind;
      const given = { optimizer: name, [key]: value === 'boolean' ? true : 0.5 } as OptimizerFields;
      t.throws(
        () => resolveOptimizer(given),
        new RegExp(`config\\.${key}: applies to .* only, not ${name}`),
        `${name} refuses ${key}`,
      );
    }
  }
});

t.test('the option table lists every key once, with each owner in its doc', async t => {
  const table = optimizerOptionTable();
  t.same(Object.keys(table).sort(), [...optimizerKeys()].sort(), 'the table and the keys resolveOptimizer knows agree');
  t.match(table.decay.doc, /rmsprop: .*adamax: /, 'decay: both owners named');
  t.same(table.optimizer.choices, builtins, 'choices: the registry');
  t.equal(table.initialAccumulatorValue.flag, 'initial-accumulator', 'a declared flag spelling is kept');
});

t.test("a plugin's optimizer: resolved, updated, listed, refused where foreign; duplicates refused", async t => {
  const halving = defineOptimizer({
    name: 'test-halving',
    kind: 'test-halving',
    options: {
      shrink: real('the step is lr × g × shrink', 0.5, { min: 0, max: 1 }),
      signOnly: flag('step by the sign of the gradient'),
    },
    defaultLr: 0.1,
    stateSlots: () => 0,
    init: () => [],
    update(config, params, grads, _state, start, end) {
      for (let i = start; i < end; i++) {
        const g = config.signOnly ? Math.sign(grads[i]) : grads[i];
        params[i] = Math.fround(params[i] - config.lr * config.shrink * g);
      }
    },
    tfjs: (tfjs, o) => tfjs.train.sgd(o.lr * o.shrink),
  });
  registerOptimizer(halving);
  t.throws(() => registerOptimizer(halving), TandemError, 'a second test-halving is refused');
  const config = resolveOptimizer({ optimizer: 'test-halving', shrink: 0.25 } as OptimizerFields) as unknown;
  t.same(config, { kind: 'test-halving', lr: 0.1, shrink: 0.25, signOnly: false }, 'defaults filled in, given kept');
  const params = new Float32Array([1, 2]);
  applyUpdate(config as OptimizerConfig, params, new Float32Array([4, -8]), [], 0, 2, 1);
  t.same([...params], [Math.fround(1 - 0.1 * 0.25 * 4), Math.fround(2 + 0.1 * 0.25 * 8)], 'its own rule ran');
  t.equal(optimizerStateSlots(config as OptimizerConfig), 0, 'its state slots');
  t.throws(
    () => resolveOptimizer({ optimizer: 'test-halving', shrink: 2 } as OptimizerFields),
    /config\.shrink: must be a number in \[0, 1\]/,
  );
  t.throws(
    () => resolveOptimizer({ optimizer: 'adam', shrink: 0.5 } as OptimizerFields),
    /config\.shrink: applies to test-halving only, not adam/,
    "adam refuses the plugin's option",
  );
  t.match(optimizerOptionTable().signOnly, { kind: 'boolean', doc: 'step by the sign of the gradient' }, 'listed');
  const { config: parsed } = parseTrainArgs(['--optimizer', 'test-halving', '--shrink', '0.25', '--sign-only']);
  t.same(parsed, { optimizer: 'test-halving', shrink: 0.25, signOnly: true }, 'its options parse as flags');
  t.match(helpText('train'), /--shrink X +test-halving: the step is lr × g × shrink/, '--help lists its option');
  const plugin = { optimizer: 'test-halving', shrink: 0.5, data: 'synthetic-images', steps: 1 } as TrainConfig;
  const run = await resolveConfig(plugin);
  t.same(run.optimizer, { kind: 'test-halving', lr: 0.1, shrink: 0.5, signOnly: false }, 'a train config takes it');
  const reference = getOptimizer('test-halving').tfjs(tf, config as never);
  t.equal(reference.getClassName(), 'SGD', 'its tfjs twin');
  reference.dispose();
});
