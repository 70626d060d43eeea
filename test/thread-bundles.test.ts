// tandem's threads start on the bundles the build writes (tools/bundle-threads.mjs, src/thread-entry.ts): one file per
// thread entry instead of ~150 modules. What must hold: every thread tandem starts goes through threadEntry and has a
// bundle, and takes tandem's worker flags (src/actors/worker-exec-argv.ts: the loader pools once did not, and each
// loader thread of a test paid the test runner's loader hooks); a real 2-device run's threads run the bundles (a
// plugin in each thread reads the bundle's mark), and give bit for bit what the same run gives on the modules one by
// one; a stale or missing bundle is never used.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { train, type TrainConfig } from '../src/index.js';
import { THREAD_BUNDLES_ENV, threadEntry } from '../src/thread-entry.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const distSrc = path.join(root, 'dist', 'src');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'tandem-thread-bundles-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

const { THREAD_ENTRIES } = (await import(pathToFileURL(path.join(root, 'tools', 'bundle-threads.mjs')).href)) as {
  THREAD_ENTRIES: string[];
};

/** The thread entries tandem's sources start (a Worker, a piscina pool, a one-shot worker), relative to src/. */
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
    for (const m of text.matchAll(/new URL\('(\.{1,2}\/[^']+-(?:worker|task)\.js)', import\.meta\.url\)/g))
      entries.add(path.posix.normalize(path.posix.join(dir, m[1])));
    // device-actor names its two entries as arguments of spawn()
    for (const m of text.matchAll(/this\.spawn\('([^']+\.js)'/g)) entries.add(path.posix.join(dir, m[1]));
    if (/new Worker\((?!threadEntry\()|filename: (?!threadEntry\()/.test(text)) bypass.push(f);
    // and with tandem's worker flags (a test runner's loader hooks left out when TANDEM_WORKER_EXEC_ARGV says so)
    if (/new (Worker|Piscina)\(/.test(text) && !text.includes('...workerFlags()'))
      bypass.push(`${f}: no workerFlags()`);
  }
  return { entries, bypass };
}

t.test('every thread entry tandem starts has a bundle, and every spawn goes through threadEntry', async t => {
  const { entries, bypass } = spawnedEntries();
  t.same([...entries].sort(), [...THREAD_ENTRIES].sort(), 'the bundled entries are the entries the sources start');
  t.same(bypass, [], 'every Worker and piscina pool of src/ starts on threadEntry(...), with workerFlags()');
  const oneShot = readFileSync(path.join(root, 'src', 'actors', 'one-shot-worker.ts'), 'utf8');
  t.match(oneShot, /new Worker\(threadEntry\(file\)/, 'and it starts threadEntry(file)');
  for (const e of THREAD_ENTRIES) {
    const entry = pathToFileURL(path.join(distSrc, e));
    t.equal(threadEntry(entry).href, entry.href.replace(/\.js$/, '.bundle.js'), `${e}: its bundle is current`);
    t.equal(threadEntry(entry, { [THREAD_BUNDLES_ENV]: '0' }).href, entry.href, `${e}: ${THREAD_BUNDLES_ENV}=0`);
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
  t.equal(threadEntry(lone, {}, compiled).href, lone.href, 'no bundle: the entry');
  const stale = file('stale.js', 1_000_000);
  file('stale.bundle.js', 1_000_000);
  t.equal(threadEntry(stale, {}, compiled).href, stale.href, 'a bundle older than the compile: the entry');
  const fresh = file('fresh.js', 1_000_000);
  const bundle = file('fresh.bundle.js', 2_000_000);
  t.equal(threadEntry(fresh, {}, compiled).href, bundle.href, 'a bundle as new as the compile: the bundle');
  const installed = file('installed.js', 1_000_000);
  const shipped = file('installed.bundle.js', 1_000_000);
  const noCompile = pathToFileURL(path.join(scratch, 'absent.tsbuildinfo'));
  t.equal(threadEntry(installed, {}, noCompile).href, shipped.href, 'no compile record (a package): the bundle');
});

// A plugin that records, in each thread that loads it, which bundle the thread runs (undefined: modules one by one).
const marks = path.join(scratch, 'marks');
const plugin = path.join(scratch, 'mark-plugin.mjs');
writeFileSync(
  plugin,
  `import { mkdirSync, writeFileSync } from 'node:fs';
import { isMainThread, threadId } from 'node:worker_threads';
mkdirSync(${JSON.stringify(marks)}, { recursive: true });
const bundle = globalThis[Symbol.for('tandem.threadBundle')] ?? null;
writeFileSync(${JSON.stringify(marks)} + '/' + threadId + '.json', JSON.stringify({ isMainThread, bundle }));
`,
);

async function markedRun(bundles: '1' | '0') {
  rmSync(marks, { recursive: true, force: true });
  const before = process.env[THREAD_BUNDLES_ENV];
  process.env[THREAD_BUNDLES_ENV] = bundles;
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
    const seen = readdirSync(marks).map(f => JSON.parse(readFileSync(path.join(marks, f), 'utf8')));
    return { summary, seen: seen as { isMainThread: boolean; bundle: string | null }[] };
  } finally {
    if (before === undefined) delete process.env[THREAD_BUNDLES_ENV];
    else process.env[THREAD_BUNDLES_ENV] = before;
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
  t.ok(workers(modules).length >= 2, 'with TANDEM_THREAD_BUNDLES=0 the threads loaded the plugin too');
  t.same(
    workers(modules).filter(s => s.bundle !== null),
    [],
    'and ran the modules one by one',
  );
  const bits = (v: ArrayLike<number>) => Buffer.from(Float32Array.from(v).buffer).toString('hex');
  t.equal(bundled.summary.weights.length, modules.summary.weights.length, 'the same parameters');
  const same = bundled.summary.weights.every((w, k) => bits(w.values) === bits(modules.summary.weights[k].values));
  t.ok(same, 'equal bit for bit');
  t.equal(bundled.summary.finalLoss, modules.summary.finalLoss, 'the same final loss');
});
