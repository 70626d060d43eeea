// The quick starts of README.md and docs/guide/getting-started.md run as written, and every relative link in the
// docs resolves. A `tandem` command that trains a few steps (or asks for help) runs for real; one that trains longer
// runs with `--steps 1`; an npm command is checked against package.json's scripts (no `npm install` in a test).
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { runNode, runTandem } from './fixtures/cli-process.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const QUICK_STARTS = ['README.md', 'docs/guide/getting-started.md'];
const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
  .scripts;

interface Block {
  file: string;
  lang: string;
  text: string;
}

function codeBlocks(file: string): Block[] {
  const blocks: Block[] = [];
  const re = /^```(\w*)\n([\s\S]*?)^```$/gm;
  for (const m of readFileSync(join(root, file), 'utf8').matchAll(re)) blocks.push({ file, lang: m[1], text: m[2] });
  return blocks;
}

/** The commands of a shell block: one a line, comments dropped. */
function shellCommands(block: Block): string[] {
  return block.text
    .split('\n')
    .map(line => line.replace(/\s+#.*$/, '').trim())
    .filter(line => line !== '' && !line.startsWith('#'));
}

const shellBlocks = QUICK_STARTS.flatMap(codeBlocks).filter(b => b.lang === 'sh');
const commands = [...new Set(shellBlocks.flatMap(shellCommands))];

/** Splits `a && b` and returns each part's words (the docs' commands quote nothing). */
const partsOf = (command: string): string[][] => command.split('&&').map(part => part.trim().split(/\s+/));

/** A training command from the docs, ready to run here: `--out` in a scratch folder, long runs cut to one step. */
function runnable(words: string[], scratch: string): { args: string[]; cut: boolean } {
  const args = words.slice(2);
  const out = args.indexOf('--out');
  if (out >= 0) args[out + 1] = join(scratch, args[out + 1]);
  const steps = args.indexOf('--steps');
  const cut = steps >= 0 && Number(args[steps + 1]) > 2;
  if (cut) args[steps + 1] = '1';
  return { args, cut };
}

t.test('the npm commands of the quick starts are scripts that do what the README says', async t => {
  const npmParts = commands.flatMap(partsOf).filter(words => words[0] === 'npm');
  t.ok(npmParts.length > 0, 'the quick starts have npm commands');
  for (const words of npmParts) {
    const [, verb, name] = words;
    if (verb === 'install' || verb === 'rebuild') {
      t.ok(existsSync(join(root, 'native/build-addon.mjs')), `${words.join(' ')}: the install step exists`);
    } else if (verb === 'start' || verb === 'test') {
      t.type(scripts[verb], 'string', `npm ${verb} is a script`);
    } else if (verb === 'run') {
      t.type(scripts[name], 'string', `npm run ${name} is a script`);
    } else t.fail(`an npm command the test does not know: ${words.join(' ')}`);
  }
  for (const words of commands.flatMap(partsOf).filter(w => w[0] === 'npx' && w[1] === 'tap')) {
    const file = words.find(w => w.endsWith('.test.js')) ?? '';
    t.ok(existsSync(join(root, file)), `${words.join(' ')}: ${file} is built`);
  }
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const said = /`npm start` builds the TypeScript and runs `tandem (train [^`]+)`/.exec(readme);
  t.ok(said, 'the README says what npm start runs');
  t.match(scripts.start, /^npm run build && node bin\/tandem\.js /, 'npm start builds, then runs bin/tandem.js');
  t.equal(scripts.start.replace(/^npm run build && node bin\/tandem\.js /, ''), said?.[1], 'the command it names');
  t.match(scripts.test, /\btap\b/, 'npm test runs tap');
  const config = /--config (\S+)/.exec(scripts.start)?.[1] ?? '';
  t.ok(existsSync(join(root, config)), `${config}, the config npm start trains, exists`);
});

t.test('the tandem commands of the quick starts run', async t => {
  const scratch = mkdtempSync(join(tmpdir(), 'tandem-docs-'));
  const tandemParts = commands.flatMap(partsOf).filter(words => words[0] === 'npx' && words[1] === 'tandem');
  t.ok(tandemParts.length >= 3, 'the quick starts have tandem commands');
  for (const words of tandemParts) {
    const shown = words.join(' ');
    const config = words.indexOf('--config');
    if (config >= 0) {
      // `node_modules/tandem/examples/…` in a project that installed tandem: the file ships in the package.
      const path = words[config + 1].replace(/^node_modules\/tandem\//, '');
      t.ok(existsSync(join(root, path)), `${shown}: ${path} exists`);
      continue;
    }
    // Each command its own scratch folder: the quick starts' commands are alternatives, and a second run into a
    // finished run's --out is refused (without --overwrite).
    const { args, cut } = runnable(words, mkdtempSync(join(scratch, 'command-')));
    const run = await runTandem(args, { cwd: root, timeoutMs: 240_000 });
    t.equal(
      run.code,
      0,
      `${shown}${cut ? ' (run with --steps 1)' : ''}: exit 0 (${run.stderr.trim().split('\n').pop()})`,
    );
    if (args.includes('--help')) t.match(run.stdout, /tandem train/, `${shown}: prints the help`);
    else t.match(run.stdout, /summary: /, `${shown}: trains and writes its summary`);
  }
});

t.test('the library quick starts run', async t => {
  const scratch = mkdtempSync(join(tmpdir(), 'tandem-docs-js-'));
  const index = pathToFileURL(join(root, 'dist/src/index.js')).href;
  const tfjs = pathToFileURL(createRequire(join(root, 'package.json')).resolve('@tensorflow/tfjs')).href;
  const blocks = QUICK_STARTS.flatMap(codeBlocks).filter(b => b.lang === 'js');
  t.ok(blocks.length >= 2, 'a library quick start in each file');
  for (const [i, block] of blocks.entries()) {
    t.match(block.text, /from 'tandem'/, `${block.file}: imports tandem by name`);
    const script = join(scratch, `quick-start-${i}.mjs`);
    // The scratch directory has no node_modules: tandem and tfjs come from this checkout (tfjs: the file tandem loads).
    writeFileSync(
      script,
      block.text.replace(/from 'tandem'/g, `from '${index}'`).replace(/from '@tensorflow\/tfjs'/g, `from '${tfjs}'`),
    );
    const run = await runNode(script, [], { cwd: scratch, timeoutMs: 240_000 });
    t.equal(run.code, 0, `${block.file}'s library quick start: exit 0 (${run.stderr.trim().split('\n').pop()})`);
    t.match(run.stdout, /^2 \d/m, `${block.file}: prints the steps trained and the final loss`);
  }
});

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'api' ? [] : markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

function anchors(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
  return new Set([...text.matchAll(/^#+ (.+)$/gm)].map(m => anchorOf(m[1])));
}

/** Pages another step writes (`npm run docs:reference`); a checkout without that step has none of them yet. */
const GENERATED = ['docs/reference/options.md', 'docs/reference/errors.md'];

t.test('every relative link in the docs resolves', async t => {
  const files = [join(root, 'README.md'), join(root, 'CHANGELOG.md'), ...markdownFiles(join(root, 'docs'))];
  for (const file of files) {
    const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target)) continue;
      const [path, anchor] = target.split('#');
      const to = path === '' ? file : resolve(dirname(file), path);
      const name = `${relative(root, file)}: ${target}`;
      if (!existsSync(to) && GENERATED.includes(relative(root, to)) && scripts['docs:reference'] === undefined) {
        t.pass(name, { skip: 'generated by npm run docs:reference, which this checkout does not have' });
        continue;
      }
      t.ok(existsSync(to), `${name} exists`);
      if (anchor && to.endsWith('.md') && existsSync(to)) t.ok(anchors(to).has(anchor), `${name}: the heading exists`);
    }
  }
});
