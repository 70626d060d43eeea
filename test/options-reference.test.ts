// The flags, the help and the reference are one list: every flag the declarations give parses through the real
// parser and sets its option; `tandem train --help` and the committed docs/reference/options.md name exactly those
// flags (a flag missing from either fails, and so does one they name that does not parse); the committed reference
// files are what the generator writes; a plugin's options are known, parsed and in the help.
import tap from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { trainFlags, type TrainFlag } from '../src/cli/train-flags.js';
import { errorsReference, optionsReference } from '../src/cli/reference-docs.js';
import { helpText } from '../src/cli/help-text.js';
import { knownKeys, registerOptions } from '../src/options/option-registry.js';
import { resolveConfig } from '../src/config.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const cli = path.join(root, 'bin/tandem.js');
const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-options-reference-'));
const run = promisify(execFile);
const MISSING_BEFORE = [
  'powersgd-rank',
  'powersgd-start-step',
  'powersgd-min-compression',
  'no-error-feedback',
  'no-warm-start',
];

/** A value the flag's kind reads, and what the option then holds. */
function sample(f: TrainFlag): { args: string[]; value: unknown } {
  const d = f.option.declaration;
  switch (f.kind) {
    case 'integer':
      return { args: ['3'], value: 3 };
    case 'optional-integer':
      return { args: ['3'], value: 3 };
    case 'real':
      return { args: ['0.5'], value: 0.5 };
    case 'string':
      return { args: [d.choices?.[0] ?? 'x'], value: d.choices?.[0] ?? 'x' };
    case 'boolean':
      return { args: [], value: true };
    case 'negated':
      return { args: [], value: false };
    case 'list':
      return { args: ['./p.mjs'], value: ['./p.mjs'] };
    case 'shape':
      return { args: ['8x8'], value: [8, 8] };
  }
}

/** The flags a text names as `--flag` at the start of a help line (the option tables). */
function helpFlags(text: string): Set<string> {
  return new Set([...text.matchAll(/^ {2}--([a-z0-9-]+)/gm)].map(m => m[1]));
}

const flags = trainFlags();
const flagNames = new Set(flags.map(f => f.flag));

tap.test('every declared flag parses through parseTrainArgs and sets its option', async t => {
  const configFile = path.join(dir, 'c.json');
  writeFileSync(configFile, '{"devices": 1}');
  for (const f of flags) {
    const { args, value } = sample(f);
    if (f.flag === 'config') {
      t.same(parseTrainArgs(['--config', configFile]).config, { devices: 1 }, '--config reads the file');
      continue;
    }
    const extra = f.flag === 'export-classifier' ? ['--out', dir] : [];
    const parsed = parseTrainArgs([`--${f.flag}`, ...args, ...extra]);
    if (f.command) {
      t.equal((parsed as unknown as Record<string, unknown>)[f.option.key], true, `--${f.flag}`);
      continue;
    }
    const c = parsed.config as Record<string, Record<string, unknown>>;
    const got = f.option.into === undefined ? c[f.option.key] : c[f.option.into]?.[f.option.key];
    t.same(got, value, `--${f.flag} sets ${f.option.path}`);
  }
});

tap.test('tandem train --help names every flag that parses, and only those', async t => {
  const { stdout } = await run(process.execPath, [cli, 'train', '--help']);
  const shown = helpFlags(stdout);
  for (const f of flagNames) t.ok(shown.has(f), `--${f} is in tandem train --help`);
  for (const f of shown) t.ok(flagNames.has(f), `--${f}, in the help, parses`);
  for (const f of MISSING_BEFORE) t.ok(shown.has(f), `--${f} (once missing) is in the help`);
  t.equal(stdout.trimEnd(), helpText('train'), 'the help printed is the generated one');
  t.match(stdout, /^Schedule arguments:$/m, 'grouped');
});

tap.test(
  'docs/reference/options.md is the generated one, and names every flag that parses, and only those',
  async t => {
    const committed = readFileSync(path.join(root, 'docs/reference/options.md'), 'utf8');
    t.equal(committed, optionsReference(), 'committed options.md = the generator output (npm run docs:reference)');
    const listed = new Set([...committed.matchAll(/`--([a-z0-9-]+)`/g)].map(m => m[1]));
    for (const f of flagNames) t.ok(listed.has(f), `--${f} is in options.md`);
    for (const f of listed) t.ok(flagNames.has(f), `--${f}, in options.md, parses`);
    for (const f of MISSING_BEFORE) t.ok(listed.has(f), `--${f} (once missing) is in options.md`);
    for (const key of knownKeys()) t.match(committed, `| \`${key}\` |`, `key ${key} is in options.md`);
    const errors = readFileSync(path.join(root, 'docs/reference/errors.md'), 'utf8');
    t.equal(errors, errorsReference(), 'committed errors.md = the generator output');
  },
);

tap.test('each command has its own help', async t => {
  for (const command of ['launch', 'profile', 'trace'] as const) {
    const { stdout } = await run(process.execPath, [cli, command, '--help']);
    t.match(stdout, new RegExp(`^tandem ${command} — `), `tandem ${command} --help starts with its own usage`);
  }
});

tap.test("a plugin's options are known keys, parse as flags, and are in --help", async t => {
  const registry = pathToFileURL(path.join(root, 'dist/src/options/option-registry.js')).href;
  const plugin = path.join(dir, 'options-plugin.mjs');
  writeFileSync(
    plugin,
    `import { registerOptions } from ${JSON.stringify(registry)};\n` +
      "registerOptions({ name: 'test plugin', table: { pluginLevel: { kind: 'integer', group: 'plugin', " +
      "doc: 'a plugin option' } } });\n",
  );
  const { stdout } = await run(process.execPath, [cli, 'train', '--plugin', plugin, '--help']);
  t.match(stdout, /^ {2}--plugin-level N +a plugin option$/m, "the plugin's flag is in the help");
  await import(pathToFileURL(plugin).href);
  t.ok(knownKeys().includes('pluginLevel'), 'its key is known');
  t.equal(parseTrainArgs(['--plugin-level', '4']).config.plugins, undefined);
  t.same((parseTrainArgs(['--plugin-level', '4']).config as Record<string, unknown>).pluginLevel, 4, 'its flag parses');
  const resolved = await resolveConfig({ pluginLevel: 2, devices: 1 } as Parameters<typeof resolveConfig>[0]);
  t.equal(resolved.devices, 1, 'a config with it resolves (no unknown option)');
  t.throws(
    () =>
      registerOptions({
        name: 'again',
        table: { devices: { kind: 'integer', group: 'world', hosts: 'same', doc: 'x' } },
      }),
    {
      code: 'BAD_CONFIG',
      message: /option devices is world's/,
    },
  );
});
