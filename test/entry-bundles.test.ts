// tandem's threads and its command line start on the bundles the build writes (tools/bundle-entries.mjs,
// src/bundled-entry.ts): one file per entry instead of ~150 modules. What must hold: every thread tandem starts goes
// through bundledEntry and has a bundle, and takes tandem's worker flags (src/actors/worker-exec-argv.ts: the loader
// pools once did not, and each loader thread of a test paid the test runner's loader hooks); a real 2-device run's
// threads run the bundles (a plugin in each thread reads the bundle's mark), and give bit for bit what the same run
// gives on the modules one by one; the `tandem` command runs its bundle; a stale or missing bundle is never used.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { train, type TrainConfig } from '../src/index.js';
import { runTandem } from './fixtures/cli-process.js';
import { smallRunArgs } from './fixtures/small-run.js';
import { sameWeightBits } from './fixtures/same-bits.js';
import { BUNDLES_ENV, bundledEntry } from '../src/bundled-entry.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const distSrc = path.join(root, 'dist', 'src');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'tandem-entry-bundles-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

const { ENTRIES } = (await import(pathToFileURL(path.join(root, 'tools', 'bundle-entries.mjs')).href)) as {
  ENTRIES: string[];
};

/**
 * The entries tandem's sources start (a Worker, a piscina pool, a one-shot worker; src/cli/main.ts the command line),
 * relative to src/.
 */
function spawnedEntries(): { entries: Set<string>; bypass: string[] } {
  const entries = new Set<string>();
  const bypass: string[] = [];
  const src = path.join(root, 'src');
  for (const f of readdirSync(src, { recursive: true }).map(String)) {
    if (!f.endsWith('.ts')) continue;
    const text = readFileSync(path.join(src, f), 'utf8')
      .split('\n')
      .filter(line => !/^\s*(\/\/|\/?\*)/.test(line)) // code, not the docs' examples
      .join('\n');
    const dir = path.posix.dirname(f.split(path.sep).join('/'));
    const named = /new URL\('(\.{1,2}\/[^']+-(?:worker|task)\.js)', import\.meta\.url\)/g;
    const wrapped = /bundledEntry\(new URL\('(\.{1,2}\/[^']+\.js)', import\.meta\.url\)\)/g;
    for (const m of [...text.matchAll(named), ...text.matchAll(wrapped)])
      entries.add(path.posix.normalize(path.posix.join(dir, m[1])));
    // device-actor names its two entries as arguments of spawn()
    for (const m of text.matchAll(/this\.spawn\('([^']+\.js)'/g)) entries.add(path.posix.join(dir, m[1]));
    if (/new Worker\((?!bundledEntry\()|filename: (?!bundledEntry\()/.test(text)) bypass.push(f);
    // and with tandem's worker flags (a test runner's loader hooks left out when TANDEM_WORKER_EXEC_ARGV says so)
    if (/new (Worker|Piscina)\(/.test(text) && !text.includes('...workerFlags()'))
      bypass.push(`${f}: no workerFlags()`);
  }
  return { entries, bypass };
}

t.test('every entry tandem starts has a bundle, and every spawn goes through bundledEntry', async t => {
  const { entries, bypass } = spawnedEntries();
  t.same([...entries].sort(), [...ENTRIES].sort(), 'the bundled entries are the entries the sources start');
  t.same(bypass, [], 'every Worker and piscina pool of src/ starts on bundledEntry(...), with workerFlags()');
  const oneShot = readFileSync(path.join(root, 'src', 'actors', 'one-shot-worker.ts'), 'utf8');
  t.match(oneShot, /new Worker\(bundledEntry\(file\)/, 'and it starts bundledEntry(file)');
  for (const e of ENTRIES) {
    const entry = pathToFileURL(path.join(distSrc, e));
    t.equal(bundledEntry(entry).href, entry.href.replace(/\.js$/, '.bundle.js'), `${e}: its bundle is current`);
    t.equal(bundledEntry(entry, { [BUNDLES_ENV]: '0' }).href, entry.href, `${e}: ${BUNDLES_ENV}=0`);
  }
});

t.test('a missing or stale bundle is not used; one as new as the compile is', async t => {
  const file = (name: string, at: number) => {
    const f = path.join(scratch, name);
    writeFileSync(f, '');
    utimesSync(f, at, at);
    return pathToFileURL(f);
  };
  const compiled = file('tsconfig.tsbuildinfo', 2_000_000);
  const lone = file('lone.js', 1_000_000);
  t.equal(bundledEntry(lone, {}, compiled).href, lone.href, 'no bundle: the entry');
  const stale = file('stale.js', 1_000_000);
  file('stale.bundle.js', 1_000_000);
  t.equal(bundledEntry(stale, {}, compiled).href, stale.href, 'a bundle older than the compile: the entry');
  const fresh = file('fresh.js', 1_000_000);
  const bundle = file('fresh.bundle.js', 2_000_000);
  t.equal(bundledEntry(fresh, {}, compiled).href, bundle.href, 'a bundle as new as the compile: the bundle');
  const installed = file('installed.js', 1_000_000);
  const shipped = file('installed.bundle.js', 1_000_000);
  const noCompile = pathToFileURL(path.join(scratch, 'absent.tsbuildinfo'));
  t.equal(bundledEntry(installed, {}, noCompile).href, shipped.href, 'no compile record (a package): the bundle');
});

// A plugin that records, in each thread that loads it, which bundle the thread runs (undefined: modules one by one).
const marks = path.join(scratch, 'marks');
const plugin = path.join(scratch, 'mark-plugin.mjs');
writeFileSync(
  plugin,
  `import { mkdirSync, writeFileSync } from 'node:fs';
import { isMainThread, threadId } from 'node:worker_threads';
mkdirSync(${JSON.stringify(marks)}, { recursive: true });
const bundle = globalThis[Symbol.for('tandem.bundle')] ?? null;
writeFileSync(${JSON.stringify(marks)} + '/' + threadId + '.json', JSON.stringify({ isMainThread, bundle }));
`,
);

/** What each thread that loaded the plugin wrote: whether it is a main thread, and the bundle it runs (or null). */
const readMarks = () => readdirSync(marks).map(f => JSON.parse(readFileSync(path.join(marks, f), 'utf8')) as Mark);
type Mark = { isMainThread: boolean; bundle: string | null };

async function markedRun(bundles: '1' | '0') {
  rmSync(marks, { recursive: true, force: true });
  const before = process.env[BUNDLES_ENV];
  process.env[BUNDLES_ENV] = bundles;
  const cfg: TrainConfig = {
    model: 'convnet-gap',
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    classes: 4,
    datasetSize: 64,
    batch: 16,
    steps: 3,
    devices: 2,
    backend: 'cpu',
    seed: 3,
    plugins: [plugin],
  };
  try {
    const summary = await train(cfg);
    return { summary, seen: readMarks() };
  } finally {
    if (before === undefined) delete process.env[BUNDLES_ENV];
    else process.env[BUNDLES_ENV] = before;
  }
}

t.test('a 2-device run starts its threads on the bundles and gives what the modules give, bit for bit', async t => {
  const bundled = await markedRun('1');
  const modules = await markedRun('0');
  const workers = (r: typeof bundled) => r.seen.filter(s => !s.isMainThread);
  const computes = workers(bundled).filter(s => s.bundle === 'actors/compute-worker.js');
  t.equal(computes.length, 2, 'both compute threads ran the compute bundle');
  t.same(
    workers(bundled).filter(s => s.bundle === null),
    [],
    'every thread that loaded the plugin ran a bundle',
  );
  t.ok(workers(modules).length >= 2, 'with TANDEM_BUNDLES=0 the threads loaded the plugin too');
  t.same(
    workers(modules).filter(s => s.bundle !== null),
    [],
    'and ran the modules one by one',
  );
  t.equal(bundled.summary.weights.length, modules.summary.weights.length, 'the same parameters');
  t.ok(sameWeightBits(bundled.summary.weights, modules.summary.weights), 'equal bit for bit');
  t.equal(bundled.summary.finalLoss, modules.summary.finalLoss, 'the same final loss');
});

t.test('the tandem command runs its bundle: a plugin in its main thread reads the mark', async t => {
  const args = ['train', '--plugin', plugin, ...smallRunArgs({ steps: 2 }), '--devices', '2', '--backend', 'cpu'];
  const marksOf = async (bundles: '1' | '0') => {
    rmSync(marks, { recursive: true, force: true });
    const run = await runTandem(args, { env: { ...process.env, [BUNDLES_ENV]: bundles }, cwd: scratch });
    t.equal(run.code, 0, `TANDEM_BUNDLES=${bundles}: the run ends well${run.code ? `: ${run.stderr}` : ''}`);
    return readMarks().filter(s => s.isMainThread);
  };
  t.same(await marksOf('1'), [{ isMainThread: true, bundle: 'cli/command-line.js' }], 'bundled: the command line');
  t.same(await marksOf('0'), [{ isMainThread: true, bundle: null }], 'TANDEM_BUNDLES=0: its modules one by one');
});
