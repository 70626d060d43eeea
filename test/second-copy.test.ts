// A plugin with its own copy of tandem: its own dependency, node_modules/tandem beside it, another path than the
// tandem that runs the job (as npm installs a plugin package that depends on tandem rather than peer-depending on
// it). What it registers (a method, options, a step probe) reaches the main thread and every device thread of a real
// run, and a TandemError it throws keeps its code there (src/named-registry.ts threadShared, src/errors.ts). Before,
// each copy had registries of its own: the run refused the method as unknown, and an error lost its code.
import t, { type Test } from 'tap';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { train, TandemError, type TrainConfig } from '../src/index.js';
import { methodNames } from '../src/methods/method-registry.js';
import { sameWeightBits } from './fixtures/same-bits.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const scratch = mkdtempSync(path.join(os.tmpdir(), 'tandem-second-copy-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

/** node_modules/tandem in `scratch`: dist/src copied (code only), the package's own fields, its dependencies linked. */
function installSecondCopy(): void {
  const copy = path.join(scratch, 'node_modules', 'tandem');
  mkdirSync(copy, { recursive: true });
  cpSync(path.join(root, 'dist', 'src'), path.join(copy, 'dist', 'src'), {
    recursive: true,
    filter: f => !f.endsWith('.map') && !f.endsWith('.d.ts'),
  });
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
  const fields = { name: pkg.name, version: pkg.version, type: pkg.type, main: pkg.main, imports: pkg.imports };
  writeFileSync(path.join(copy, 'package.json'), JSON.stringify(fields));
  symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'), 'dir');
}

const PLUGIN = `
import { isMainThread } from 'node:worker_threads';
import { getMethod, registerMethod, registerOptions, registerStepProbe, TandemError } from 'tandem';
if (isMainThread)
  registerOptions({
    name: 'second copy',
    table: {
      secondCopyFailAt: {
        kind: 'config',
        group: 'reliability',
        doc: "test: the step whose forward the second copy's probe fails on device 1",
        check: v => v,
      },
    },
  });
registerStepProbe({
  name: 'second-copy-probe',
  enter(at, values) {
    if (at.phase === 'forward' && at.device === 1 && at.step === values.secondCopyFailAt)
      throw new TandemError('BAD_DATA', 'the probe of the second copy stops step ' + at.step);
  },
});
const dp = getMethod('data-parallel');
registerMethod({ ...dp, name: 'second-copy-dp', description: 'data-parallel, registered by a second copy' });
registerMethod({
  ...dp,
  name: 'second-copy-fails',
  description: 'raises BAD_DATA on device 1 in step 2, from a second copy',
  createDevice(ctx) {
    const base = dp.createDevice(ctx);
    return {
      ...base,
      loss(out, ys, labels, step) {
        if (step === 2 && ctx.device === 1) throw new TandemError('BAD_DATA', 'the second copy refuses step 2');
        return base.loss(out, ys, labels, step);
      },
    };
  },
});
export { TandemError as SecondTandemError };
`;

installSecondCopy();
const plugin = path.join(scratch, 'plugin.mjs');
writeFileSync(plugin, PLUGIN);
const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 96,
  batch: 12,
  steps: 4,
  backend: 'cpu',
  devices: 2,
  seed: 7,
  plugins: [plugin],
};

t.test('the copy is another module: its TandemError is another class, and still a TandemError', async t => {
  const { SecondTandemError } = (await import(pathToFileURL(plugin).href)) as { SecondTandemError: typeof TandemError };
  t.not(SecondTandemError, TandemError, 'the plugin loaded a second TandemError class');
  const theirs = new SecondTandemError('BAD_DATA', 'from the copy');
  t.ok(theirs instanceof TandemError, "the copy's error is instanceof this TandemError");
  t.ok(new TandemError('BAD_DATA', 'here') instanceof SecondTandemError, 'and the other way round');
  t.notOk(new Error('plain') instanceof TandemError, 'a plain Error is not');
  t.notOk({ code: 'BAD_DATA' } instanceof TandemError, 'nor an object with a code');
  class Narrower extends TandemError {}
  t.ok(new Narrower('BAD_DATA', 'n') instanceof Narrower, 'a subclass keeps its own instanceof');
  t.notOk(theirs instanceof Narrower, 'which a TandemError of the copy is not');
  t.ok(methodNames().includes('second-copy-dp'), "what the copy registered is in this thread's registry");
});

t.test('a method the copy registered trains on 2 devices, as the method it wraps', async t => {
  const theirs = await train({ ...base, method: 'second-copy-dp' });
  const ours = await train({ ...base, method: 'data-parallel' });
  t.equal(theirs.weights.length, ours.weights.length, 'the same parameters');
  t.ok(sameWeightBits(theirs.weights, ours.weights), 'bit for bit the parameters data-parallel reaches');
  t.equal(theirs.finalLoss, ours.finalLoss, 'and the same final loss');
});

/** A run that must fail on device 1 in step `step`'s forward with the copy's BAD_DATA and `words` in the message. */
async function failsOnDevice1(t: Test, cfg: TrainConfig, step: number, words: RegExp): Promise<void> {
  const err = await train(cfg).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof TandemError, 'the run fails with a TandemError');
  const e = err as TandemError;
  t.equal(e.code, 'BAD_DATA', "with the copy's code");
  t.match(e.context, { device: 1, step, phase: 'forward' });
  t.match(e.message, words);
}

t.test('a TandemError the copy throws in a device thread keeps its code and context', t =>
  failsOnDevice1(t, { ...base, method: 'second-copy-fails' }, 2, /the second copy refuses step 2/),
);

t.test('an option and a step probe the copy registered: the config takes the option, the probe fires', t =>
  failsOnDevice1(t, { ...base, secondCopyFailAt: 3 } as TrainConfig, 3, /the probe of the second copy stops step 3/),
);
