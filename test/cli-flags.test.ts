// The command line's flags as a new user types them, through the real `tandem` command: an option that writes only
// into --out given without --out, a flag given twice, numbers in a notation Number() reads but a person does not mean
// (0x10, 1e3 steps, ' 8', ''), and `tandem launch` with a bad train flag. Each is BAD_CONFIG naming the flag, the
// value and the fix, before anything trains or any host process starts. A value the library refuses (config.devices …)
// is shown with the flag that set it first.
import tap from 'tap';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { type FinishedProcess, runTandem } from './fixtures/cli-process.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-cli-flags-'));
/** A run that trains in seconds: what a missing check lets through ends quickly. */
const SMALL = [
  '--model',
  'mlp',
  '--data',
  'synthetic-images',
  '--image-size',
  '6x6x1',
  '--classes',
  '4',
  '--dataset-size',
  '64',
  '--devices',
  '2',
  '--backend',
  'cpu',
  '--quiet',
];
const LOCAL_HEAD = [...SMALL, '--method', 'local-head', '--embedding', '8', '--batch', '8', '--steps', '2'];

/** `args` without flag `name` (and its value), then `flags`. */
const replacing = (args: string[], name: string, flags: string[]) => [
  ...args.filter((a, i) => a !== name && args[i - 1] !== name),
  ...flags,
];

type CliRun = FinishedProcess;
const runCli = (args: string[]) => runTandem(args);

/** `args` fail as a bad flag does: exit 1, one `tandem: MESSAGE` line on stderr, nothing trained. */
async function refused(
  t: Pick<typeof tap, 'equal' | 'match' | 'notMatch'>,
  args: string[],
  message: RegExp,
  name: string,
): Promise<CliRun> {
  const r = await runCli(args);
  t.equal(r.code, 1, `${name}: exit 1`);
  t.match(r.stderr, message, `${name}: names the culprit`);
  t.match(r.stderr, /^tandem: [^\n]*\n$/, `${name}: one line, no stack trace`);
  t.notMatch(r.stdout, /done:/, `${name}: nothing trained`);
  return r;
}

tap.test(
  '--export-classifier without --out: refused before training, saying to add --out DIR (it trained and wrote the ' +
    'classifier nowhere)',
  async t => {
    await refused(
      t,
      ['train', ...LOCAL_HEAD, '--export-classifier'],
      /^tandem: --export-classifier writes the full classifier into --out DIR \(as DIR\/classifier\), and no --out was given: add --out DIR/,
      'no --out',
    );
    const out = path.join(dir, 'classifier-run');
    const r = await runCli(['train', ...LOCAL_HEAD, '--export-classifier', '--out', out]);
    if (!t.equal(r.code, 0, 'with --out DIR: trains, exit 0')) t.comment(r.stderr);
    t.ok(existsSync(path.join(out, 'classifier', 'model.json')), 'with --out DIR: DIR/classifier/model.json');
  },
);

tap.test(
  'a flag given twice: refused naming the flag and both values (the last used to win silently); --plugin repeats',
  async t => {
    await refused(
      t,
      ['train', ...SMALL, '--batch', '8', '--steps', '5', '--steps', '7'],
      /^tandem: --steps is given twice \('5', then '7'\): give it once \(only --feature-columns, --plugin may repeat\)/,
      '--steps twice',
    );
    await refused(
      t,
      ['train', ...SMALL, '--batch=8', '--steps', '2', '--batch', '16'],
      /^tandem: --batch is given twice \('8', then '16'\)/,
      '--batch=8 then --batch 16',
    );
    await refused(
      t,
      ['launch', '--hosts', '2', '--hosts', '3', ...SMALL, '--batch', '8', '--steps', '2'],
      /^tandem: tandem launch --hosts is given twice \('2', then '3'\): give it once/,
      'launch --hosts twice',
    );
    t.same(
      parseTrainArgs(['--plugin', 'a.mjs', '--plugin', 'b.mjs']).config,
      { plugins: ['a.mjs', 'b.mjs'] },
      '--plugin twice: both, in order',
    );
  },
);

tap.test(
  'numbers: integers in decimal digits, reals in decimal or exponent notation; hex, 1e3 steps, blanks and empty ' +
    'text are refused',
  async t => {
    const base = ['train', ...SMALL, '--batch', '8', '--steps', '2'];
    const integer = (flag: string, v: string) =>
      new RegExp(
        `^tandem: --${flag} must be a number written as decimal digits \\(an integer, e\\.g\\. 8\\), got '${v}'`,
      );
    const real = (flag: string, v: string) =>
      new RegExp(
        `^tandem: --${flag} must be a number written in decimal or exponent notation \\(e\\.g\\. 0\\.01 or 1e-3\\), ` +
          `got '${v}'`,
      );
    const cases: [string[], RegExp][] = [
      [['--steps', '0x10'], integer('steps', '0x10')], // it trained 16 steps
      [['--steps', '1e3'], integer('steps', '1e3')], // 1000 steps
      [['--batch', ' 8'], integer('batch', ' 8')], // batch 8
      [['--lr', ''], real('lr', '')],
      [['--lr', '0x1'], real('lr', '0x1')], // lr 1
      [['--momentum', 'Infinity'], real('momentum', 'Infinity')],
      [['--powersgd-rank', '2.5'], integer('powersgd-rank', '2\\.5')],
      [['--image-size', '1e1x8'], /^tandem: --image-size must look like 32x32 or 32x32x3, got '1e1x8'/], // 10x8
    ];
    for (const [flag, message] of cases) {
      await refused(t, replacing(base, flag[0], flag), message, `${flag[0]} '${flag[1]}'`);
    }
    t.same(
      parseTrainArgs(['--lr', '1e-3', '--momentum', '.5', '--scale', '30', '--devices', '-1', '--steps', '0012'])
        .config,
      { lr: 0.001, momentum: 0.5, scale: 30, devices: -1, steps: 12 },
      'exponent notation for a real, a sign, leading zeros: read',
    );
  },
);

tap.test(
  'tandem launch with a bad train flag fails as train does, before any host process starts (the hosts used to start ' +
    'and fail one by one)',
  async t => {
    for (const bad of [
      ['--devices', '0'],
      ['--steps', '0x10'],
      ['--steps', '2', '--steps', '3'],
    ]) {
      const flags = replacing([...SMALL, '--batch', '8', '--steps', '2'], bad[0], bad);
      const train = await runCli(['train', ...flags]);
      const launch = await runCli(['launch', '--hosts', '2', ...flags]);
      t.equal(train.code, 1, `train ${bad.join(' ')}: exit 1`);
      t.same(
        { code: launch.code, stderr: launch.stderr },
        { code: train.code, stderr: train.stderr },
        `launch ${bad.join(' ')}: train's exit code and message (${train.stderr.trim()})`,
      );
      t.notMatch(
        launch.stdout + launch.stderr,
        /\[host \d\]|tandem launch: 2 hosts/,
        `launch ${bad.join(' ')}: no host started`,
      );
    }
  },
);

tap.test('a bad value the library refuses names the flag first, then its config field', async t => {
  await refused(
    t,
    ['train', ...replacing(SMALL, '--devices', ['--devices', '0'])],
    /^tandem: --devices \(config\.devices\): must be an integer in \[1, 64\], got 0\n$/,
    '--devices 0',
  );
  await refused(
    t,
    ['train', ...SMALL, '--lr', '-1'],
    /^tandem: --lr \(config\.lr\): must be a number in \[0, 10\], got -1\n$/,
    '--lr -1',
  );
  await refused(
    t,
    ['train', ...SMALL, '--comm-hook', 'fp16', '--powersgd-rank', '2'],
    /^tandem: --powersgd-rank \(config\.commHookOptions\.rank\): applies to the powersgd hook only/,
    '--powersgd-rank with fp16',
  );
  await refused(
    t,
    ['train', ...SMALL, '--powersgd-rank', '2'],
    /^tandem: --powersgd-rank \(config\.commHookOptions\.rank\): given without commHook/,
    '--powersgd-rank without --comm-hook (it named commHookOptions, which the user never wrote)',
  );
  await refused(
    t,
    ['train', ...replacing(SMALL, '--model', ['--model', 'nosuch'])],
    /^tandem: --model \(config\.model\): unknown model 'nosuch'/,
    '--model nosuch',
  );
  await refused(
    t,
    ['train', ...SMALL, '--batch', '8', '--held-out', '10', '--eval-samples', '50'],
    /^tandem: --eval-samples \(config\.evalSamples\): 50 is more than the 10 held-out samples \(heldOut is 10\): give evalSamples 10 or fewer \(--eval-samples 10\), or hold out more with heldOut 50 \(--held-out 50\)\n$/,
    '--eval-samples 50 --held-out 10 (it evaluated 10, silently)',
  );
});

tap.test('a mistyped flag or --config key is named with the one meant (it said only "Unknown option")', async t => {
  await refused(
    t,
    ['train', ...SMALL, '--stps', '3'],
    /^tandem: tandem train: Unknown option '--stps'\. Did you mean --steps\? See tandem --help\.\n$/,
    '--stps',
  );
  await refused(t, ['profile', '--devics', '2'], /Unknown option '--devics'\. Did you mean --devices\?/, '--devics');
  // another tool's name (Keras' batch_size, torchrun's --nproc-per-node): the option tandem has for it
  for (const [given, meant] of [
    ['--batch-size', '--batch'],
    ['--batch_size', '--batch'],
    ['--learning-rate', '--lr'],
    ['--nproc-per-node', '--devices'],
  ])
    await refused(t, ['train', ...SMALL, given, '3'], new RegExp(`'${given}'\\. Did you mean ${meant}\\?`), given);
  await refused(
    t,
    ['train', ...SMALL, '--gpus', '2'],
    /'--gpus'\. One process per GPU is tandem launch --gpus N/,
    '--gpus',
  );
  const far = await refused(t, ['train', ...SMALL, '--xyzzy', '3'], /Unknown option '--xyzzy'\./, '--xyzzy');
  t.notMatch(far.stderr, /Did you mean/, 'a name near none: no guess');
  const config = path.join(dir, 'typo.json');
  writeFileSync(config, JSON.stringify({ stpes: 3 }));
  await refused(
    t,
    ['train', ...SMALL, '--config', config],
    /^tandem: config\.stpes: unknown option: did you mean steps\?/,
    'stpes in --config',
  );
});
