// The rest of the docs as a user types it (the quick starts run in docs-commands.test.ts):
// - every ```ts and ```js block of README.md and docs/guide/*.md, and every example of the API reference (the doc
//   comments of what src/index.ts exports: fixtures/api-examples.ts), is type-checked by tsc against the built
//   package's types, importing `tandem` by name as a project that installed it does; the names a snippet leaves to
//   the reader (your `model`, `x`, `y`, …) are declared in GIVENS below, and nothing else is;
// - every `tandem train|profile|launch` command of a shell block (and every `npx tandem …` in the text) goes through
//   the CLI's flag parser and the config check, in a folder that holds stand-ins for the files it names;
// - every ```json block of the docs and every examples/*.json passes the config check `--config` applies.
import t from 'tap';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  unlinkSync,
  readFileSync,
  readdirSync,
  symlinkSync,
} from 'node:fs';
import { writeFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { splitLaunchArgs } from '../src/world/launch.js';
import { checkConfig } from '../src/config.js';
import type { TrainConfig } from '../src/config-types.js';
import { BUILTIN_MODELS } from '../src/model/builtin-models.js';
import { trainFlags } from '../src/cli/train-flags.js';
import { helpText } from '../src/cli/help-text.js';
import { COMM_HOOKS } from '../src/pipeline/comm-hook.js';
import { ERROR_MEANINGS } from '../src/cli/error-meanings.js';
import { apiExamples } from './fixtures/api-examples.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** Every folder this file writes is under one scratch folder, removed at the end. */
const scratch = mkdtempSync(join(tmpdir(), 'tandem-docs-snippets-'));
const LINKS = ['node_modules/tandem', ...['@tensorflow', 'rxjs', '@types'].map(name => `node_modules/${name}`)];
t.teardown(() => {
  // the links first (they point into this checkout), then the folders
  for (const dir of readdirSync(scratch).filter(d => d.startsWith('project-')))
    for (const link of LINKS) unlinkSync(join(scratch, dir, link));
  rmSync(scratch, { recursive: true, force: true });
});
const GUIDES = ['README.md', ...readdirSync(join(root, 'docs/guide')).map(f => `docs/guide/${f}`)].filter(f =>
  f.endsWith('.md'),
);

/** What a snippet may use without declaring it: the reader's own model and data. */
const GIVENS = `import type * as tf from '@tensorflow/tfjs';
declare global {
  const model: tf.LayersModel;
  const x: tf.Tensor, y: tf.Tensor, xTest: tf.Tensor, yTest: tf.Tensor, labels: tf.Tensor, targets: tf.Tensor;
  const callbacks: tf.CustomCallbackArgs[];
  const hostRank: number;
  const SAMPLES: number;
  function sample(i: number): tf.TensorContainer;
  function makeSamples(): Iterator<tf.TensorContainer>;
}
`;

interface Block {
  file: string;
  line: number;
  lang: string;
  text: string;
}

function codeBlocks(file: string): Block[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map(m => ({
    file,
    line: text.slice(0, m.index).split('\n').length,
    lang: m[1],
    text: m[2],
  }));
}

/** A scratch project: node_modules holds tandem (this checkout, built) and what its snippets import. */
function scratchProject(): string {
  const dir = mkdtempSync(join(scratch, 'project-'));
  mkdirSync(join(dir, 'node_modules'));
  for (const link of LINKS)
    symlinkSync(link === 'node_modules/tandem' ? root : join(root, link), join(dir, link), 'dir');
  return dir;
}

t.test('every ts and js snippet of the guides and the API reference type-checks against the package', async t => {
  // and each `import { … } from 'tandem'` the text shows inline: the names it imports are exported
  const inline = GUIDES.flatMap(file =>
    [...readFileSync(join(root, file), 'utf8').matchAll(/`(import \{[^}`]+\} from 'tandem');?`/g)].map(m => ({
      file,
      line: 0,
      lang: 'ts',
      text: `${m[1].replace(/\s+/g, ' ')};`,
    })),
  );
  const blocks = [
    ...GUIDES.flatMap(codeBlocks).filter(b => b.lang === 'ts' || b.lang === 'js'),
    ...inline.map((b, i) => ({ ...b, line: -1 - i })),
  ];
  t.ok(blocks.length >= 10, `the guides have snippets (${blocks.length})`);
  const examples = apiExamples(root);
  t.ok(examples.length >= 3, `the API reference has examples (${examples.length})`);
  blocks.push(...examples.map((e, i) => ({ file: e.where, line: 1e6 + i, lang: e.lang, text: e.text })));
  const dir = scratchProject();
  const names = new Map<string, Block>();
  for (const b of blocks) {
    // A js block is a .mjs file (JSDoc types are checked, parameters may go untyped); a ts block a .mts.
    const name = `${b.file.replace(/\W/g, '_')}_${b.line}.${b.lang === 'ts' ? 'mts' : 'mjs'}`;
    names.set(name, b);
    writeFileSync(join(dir, name), `${b.text}\nexport {};\n`);
  }
  writeFileSync(join(dir, 'givens.d.ts'), GIVENS);
  const compilerOptions = {
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    target: 'ES2022',
    strict: true,
    noImplicitAny: false,
    noEmit: true,
    allowJs: true,
    checkJs: true,
    skipLibCheck: true,
    types: ['node'],
  };
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions, include: ['*.mts', '*.mjs', 'givens.d.ts'] }),
  );
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  const output = await new Promise<string>(resolve =>
    execFile(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { cwd: dir }, (_err, stdout) =>
      resolve(stdout),
    ),
  );
  const errors = output.split('\n').filter(l => /error TS\d+/.test(l));
  for (const [name, b] of names) {
    const own = errors.filter(l => l.startsWith(name));
    const where =
      b.line < 0 ? `${b.file} (an import in the text)` : b.line >= 1e6 ? b.file : `${b.file}:${b.line} (${b.lang})`;
    t.same(own, [], `${where} type-checks`);
  }
  t.same(
    errors.filter(l => ![...names.keys()].some(n => l.startsWith(n))),
    [],
    'no other error (the givens, the setup)',
  );
});

/** Flags whose value is a file or folder the reader has (or a builtin name). */
const PATH_FLAGS = ['--model', '--data', '--config', '--job-secret-file', '--plugin', '--comm-hook'];
const BUILTIN = new Set<string>([
  ...Object.keys(BUILTIN_MODELS),
  'mnist',
  'synthetic-images',
  'fp16',
  'bf16',
  'powersgd',
  'auto',
]);

/** Writes stand-ins for the files a command names into `dir` (its columns for a CSV, a secret of mode 600, …). */
function standIns(words: string[], dir: string): void {
  const valueOf = (flag: string) => words[words.indexOf(flag) + 1] as string | undefined;
  for (const [i, word] of words.entries()) {
    const path = words[i + 1];
    if (!PATH_FLAGS.includes(word) || path === undefined || BUILTIN.has(path)) continue;
    const at = join(dir, path);
    mkdirSync(join(at, path.endsWith('/') ? '' : '..'), { recursive: true });
    if (path.endsWith('/')) continue;
    // A config the package ships, or the reader's own (`train.json`): one that leaves the rest to the flags.
    const shipped = join(root, path.replace(/^node_modules\/tandem\//, ''));
    if (word === '--config' && existsSync(shipped)) copyFileSync(shipped, at);
    else if (word === '--config') writeFileSync(at, JSON.stringify({ model: 'mlp', data: 'synthetic-images' }));
    else if (word === '--job-secret-file') {
      writeFileSync(at, 'a-job-secret-of-forty-four-characters-for-us=\n');
      chmodSync(at, 0o600);
    } else if (path.endsWith('.csv')) {
      const columns = [valueOf('--label-column') ?? 'label', ...(valueOf('--feature-columns') ?? 'a').split(',')];
      writeFileSync(at, `${columns.join(',')}\n${columns.map(() => '1').join(',')}\n`);
    } else if (path.endsWith('.json')) writeFileSync(at, '{}\n');
    else writeFileSync(at, 'export default () => undefined;\n');
  }
}

/** The tandem commands of the guides: a shell block's lines (continued with `\`), and `npx tandem …` in the text. */
function tandemCommands(file: string): { file: string; command: string }[] {
  const shell = codeBlocks(file)
    .filter(b => ['sh', 'bash', ''].includes(b.lang))
    .flatMap(b => b.text.replace(/\\\n\s*/g, ' ').split('\n'))
    .map(line => line.replace(/\s+#.*$/, '').trim())
    .filter(line => !line.startsWith('#'));
  const prose = readFileSync(join(root, file), 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
  const inline = [...prose.matchAll(/`(npx tandem [^`…]+)`/g)].map(m => m[1]);
  return [...shell, ...inline]
    .map(line => /(?:^|\s)(?:npx )?(tandem (?:train|profile|launch)\s.*)$/.exec(line)?.[1])
    .filter((c): c is string => c !== undefined && !/\s--help\b/.test(c))
    .map(command => ({ file, command }));
}

/** What `tandem launch ARGS` has host 0 run (launch.ts's memberTrainArgs): a process per host, or per GPU of each. */
function launchedArgs(argv: string[]): string[] {
  const { hosts, gpus, trainArgs } = splitLaunchArgs(argv);
  const world = hosts * (gpus ?? 1);
  const worldArgs = world > 1 ? ['--hosts', String(world), '--host-rank', '0', '--rendezvous', '127.0.0.1:29500'] : [];
  // the launcher makes the job's secret for the processes it starts
  const secret = world > 1 && !trainArgs.includes('--job-secret-file') ? ['--insecure'] : [];
  return [...trainArgs, ...(gpus ? ['--devices', '1'] : []), ...worldArgs, ...secret];
}

/** `tandem train|profile|launch ARGS` through the CLI's parser and the config check, in `cwd`. */
function dryCheck(words: string[], cwd: string): TrainConfig {
  const [, command, ...rest] = words;
  const args = command === 'launch' ? launchedArgs(rest) : rest;
  const previous = process.cwd();
  process.chdir(cwd);
  try {
    const { config } = parseTrainArgs(args, command === 'profile' ? 'profile' : 'train');
    checkConfig(config);
    return config;
  } finally {
    process.chdir(previous);
  }
}

t.test('every tandem command of the guides parses and passes the config check', async t => {
  const commands = GUIDES.flatMap(tandemCommands);
  t.ok(commands.length >= 20, `the guides have tandem commands (${commands.length})`);
  for (const { file, command } of commands) {
    // Placeholders a reader fills in: `R` (this host's rank).
    const words = command.split(/\s+/).map(w => (w === 'R' ? '0' : w));
    const dir = mkdtempSync(join(scratch, 'command-'));
    standIns(words, dir);
    let error: unknown;
    try {
      dryCheck(words, dir);
    } catch (err) {
      error = err;
    }
    t.equal(error, undefined, `${file}: ${command}${error ? ` (${String(error)})` : ''}`);
  }
});

t.test('every json config of the docs and the examples passes the config check', async t => {
  const files = [...GUIDES, ...readdirSync(join(root, 'docs/reference')).map(f => `docs/reference/${f}`)];
  const blocks = files.flatMap(codeBlocks).filter(b => b.lang === 'json');
  const examples = readdirSync(join(root, 'examples')).filter(f => f.endsWith('.json'));
  t.ok(examples.length >= 1, 'examples has a config');
  const configs = [
    ...blocks.map(b => ({ name: `${b.file}:${b.line}`, text: b.text })),
    ...examples.map(f => ({ name: `examples/${f}`, text: readFileSync(join(root, 'examples', f), 'utf8') })),
  ];
  for (const { name, text } of configs) {
    const dir = mkdtempSync(join(scratch, 'json-'));
    const path = join(dir, basename(name.replace(/:\d+$/, '')).replace(/\.md$/, '.json'));
    writeFileSync(path, text);
    let error: unknown;
    try {
      dryCheck(['tandem', 'train', '--config', path], root);
    } catch (err) {
      error = err;
    }
    t.equal(error, undefined, `${name}: the config check passes${error ? ` (${String(error)})` : ''}`);
  }
});

/** What each flag takes by name: its declared choices, the built-in models, the built-in hooks. */
function flagChoices(): Map<string, readonly string[]> {
  const choices = new Map<string, readonly string[]>();
  for (const f of trainFlags()) if (f.option.declaration.choices) choices.set(f.flag, f.option.declaration.choices);
  choices.set('model', Object.keys(BUILTIN_MODELS));
  choices.set('comm-hook', [...COMM_HOOKS, 'auto']);
  return choices;
}

t.test('the choices the guides list for a flag are the ones it takes', async t => {
  const choices = flagChoices();
  let lists = 0;
  for (const file of GUIDES) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const [, flag, list] of text.matchAll(/`--([a-z-]+) ([\w.-]+(?:\|[\w.-]+)+)`/g)) {
      const known = choices.get(flag);
      if (!known) continue;
      lists++;
      // upper case: a placeholder (PATH, DIR); the rest are names the flag must take
      const named = list.split('|').filter(v => v === v.toLowerCase());
      t.same(
        named.filter(v => !known.includes(v)),
        [],
        `${file}: --${flag} ${list}: every name is one it takes (${known.join(', ')})`,
      );
      // training.md's list of flags is the reference a reader takes in whole: every choice is there
      if (file === 'docs/guide/training.md')
        t.same(
          known.filter(v => !named.includes(v)),
          [],
          `${file}: --${flag} lists every choice`,
        );
    }
  }
  t.ok(lists >= 10, `the guides list choices (${lists})`);
  const help = helpText();
  for (const name of Object.keys(BUILTIN_MODELS)) t.match(help, name, `tandem --help names the model ${name}`);
});

t.test('no code block of the docs is empty (a picture reflowed out of its fence leaves one)', async t => {
  const files = [...GUIDES, 'CHANGELOG.md', ...readdirSync(join(root, 'docs/design')).map(f => `docs/design/${f}`)];
  for (const b of files.filter(f => f.endsWith('.md')).flatMap(codeBlocks))
    t.not(b.text.trim(), '', `${b.file}:${b.line}: the block has content`);
});

/** The .ts files under `dir`, recursively. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap(e =>
    e.isDirectory() ? sourceFiles(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
  );
}

t.test('every docs page the source names (in messages and comments) exists', async t => {
  let named = 0;
  for (const file of sourceFiles('src')) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const [page] of text.matchAll(/docs\/(?:guide|reference|design)\/[\w-]+\.md/g)) {
      named++;
      t.ok(existsSync(join(root, page)), `${file}: ${page} exists`);
    }
    t.notMatch(text, /\(README, "/, `${file}: names no README section (the README's sections moved to docs/guide)`);
  }
  t.ok(named >= 10, `the source names docs pages (${named})`);
});

t.test('every file of the repository the docs name exists (a test renamed, a module moved)', async t => {
  const files = [...GUIDES, ...readdirSync(join(root, 'docs/design')).map(f => `docs/design/${f}`)];
  const re = /(dist\/)?\b(?:test|src|bench|tools|native|examples)\/[\w./-]+\.(?:ts|mjs|js|json|cc|h|py|sh|cjs)\b/g;
  let named = 0;
  for (const file of files.filter(f => f.endsWith('.md'))) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const m of text.matchAll(re)) {
      // dist/…: what the build writes; its source is the .ts beside the path without dist/
      const path = m[1] ? m[0].slice(m[1].length).replace(/(\.d)?\.js$|\.d\.ts$/, '.ts') : m[0];
      named++;
      t.ok(existsSync(join(root, path)), `${file}: ${m[0]} exists`);
    }
  }
  t.ok(named >= 100, `the docs name files (${named})`);
});

t.test("errors-explained.md's table has a row for every error code", async t => {
  const text = readFileSync(join(root, 'docs/guide/errors-explained.md'), 'utf8');
  const rows = text.split('\n').filter(line => line.startsWith('| `'));
  for (const code of Object.keys(ERROR_MEANINGS))
    t.ok(
      rows.some(row => row.split('|')[1].includes(`\`${code}\``)),
      `${code} has a row`,
    );
});

t.test('every npm script and bench the docs name exists', async t => {
  const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
    .scripts;
  const benches = readFileSync(join(root, 'bench/main.ts'), 'utf8');
  const files = [...GUIDES, ...readdirSync(join(root, 'docs/design')).map(f => `docs/design/${f}`)];
  for (const file of files.filter(f => f.endsWith('.md'))) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const [, name] of text.matchAll(/npm run ([\w:-]+)/g))
      t.type(scripts[name], 'string', `${file}: npm run ${name} is a script`);
    for (const [, name] of text.matchAll(/npm run bench -- ([a-z][\w-]*)/g))
      t.ok(benches.includes(`'${name}'`), `${file}: the bench ${name} is in bench/main.ts`);
  }
});
