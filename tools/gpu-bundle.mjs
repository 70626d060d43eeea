// `npm run gpu-bundle [-- --out DIR]`: one self-contained folder (default gpu-bundle/, ignored by git, at most
// 56 MiB) that runs tandem's GPU check on a bare x86-64 machine with no network and no Node.js (docs/guide/gpu.md):
//   node.xz          this machine's node binary, xz-compressed
//   tandem.tar.xz    package.json, dist/src and dist/bench (no source maps, no typings), bench/torch/*.py, the shm
//                    addon when it is built, and node_modules pruned to the runtime closure of what those import:
//                    the tfjs packages' node bundles only, webgpu's linux-x64 dawn.node only, no dev dependencies
//   debs/*.deb       Debian's Vulkan loader and GL dispatch packages (apt-get download, here, at build time only)
//   gpu-check.sh     the check (tools/gpu-check.sh), which unpacks the rest next to itself or in --work DIR
//   MANIFEST.txt     what went in, with sizes
// Run after `npm run build` (the npm script does both). Needs xz (apt-get install xz-utils) and apt-get.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const LIMIT = 56 * 1024 * 1024;
/** Debian packages for the Vulkan loader and the GL dispatch libraries NVIDIA's ICD links to (device README). */
const DEBS = ['libvulkan1', 'libglvnd0', 'libglx0', 'libgl1', 'libegl1', 'libopengl0', 'libgles2'];
/** What tandem's own code imports at run time (package.json dependencies the webgpu and cpu engines reach). */
const ENTRY_PACKAGES = [
  '@tensorflow/tfjs',
  '@tensorflow/tfjs-core',
  '@tensorflow/tfjs-backend-cpu',
  '@tensorflow/tfjs-backend-webgpu',
  '@tensorflow/tfjs-backend-wasm',
  '@tensorflow/tfjs-layers',
  'msgpackr',
  'piscina',
  'pngjs',
  'rxjs',
  'webgpu',
  'pbf', // TensorBoard event files (src/monitor/tfevents.ts)
  '@aws-crypto/crc32c',
];
/**
 * package.json dependencies the GPU check never loads: the addons' build headers, the MNIST data, the image and CSV
 * readers (imported only when --data is an image folder or a .csv), the charts (uplot: the dashboard reads its files
 * only when a page asks for them, src/monitor/dashboard-assets.ts, and shows its values as text without it; the GPU
 * check serves no dashboard).
 */
const NOT_AT_RUN_TIME = ['node-addon-api', 'mnist', 'sharp', 'bmp-ts', 'csv-parse', 'uplot'];
const BUILTIN = new Set(builtinModules.flatMap(m => [m, `node:${m}`]));

function fail(message) {
  console.error(`gpu-bundle: ${message}`);
  process.exit(1);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28, ...opts });
  if (r.error) fail(`${cmd} could not run: ${r.error.message}${cmd === 'xz' ? ' (apt-get install xz-utils)' : ''}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed (${r.status}):\n${(r.stderr ?? '').slice(-2000)}`);
  return r.stdout;
}

function parseOut(argv) {
  const i = argv.indexOf('--out');
  return path.resolve(i >= 0 ? argv[i + 1] : path.join(root, 'gpu-bundle'));
}

/** Files under `dir` (relative paths), recursively. */
function walk(dir, rel = '') {
  const out = [];
  for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = path.join(rel, e.name);
    if (e.isDirectory()) out.push(...walk(dir, r));
    else if (e.isFile()) out.push(r);
  }
  return out;
}

function copyInto(stage, rel, from = path.join(root, rel)) {
  mkdirSync(path.dirname(path.join(stage, rel)), { recursive: true });
  copyFileSync(from, path.join(stage, rel));
}

/** The package folder `name` resolves to from `fromDir` (node_modules lookup upwards, as Node does). */
function packageDir(name, fromDir) {
  for (let dir = fromDir; dir.startsWith(root); dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (dir === root) break;
  }
  return undefined;
}

const packageName = spec => (spec.startsWith('@') ? spec.split('/').slice(0, 2) : spec.split('/').slice(0, 1)).join('/');
const SPECIFIERS = /(?:require\(|import\(|from\s+|import\s+)\s*['"]([^'"\n]+)['"]/g;

/** Relative files a package keeps: its entry points, and what they reach through relative requires and imports. */
function packageFiles(dir, pkg) {
  const entries = new Set();
  const addEntry = p => typeof p === 'string' && entries.add(path.normalize(p));
  addEntry(pkg.main ?? 'index.js');
  const exp = pkg.exports?.['.'] ?? pkg.exports;
  const visit = v => (typeof v === 'string' ? addEntry(v) : v && typeof v === 'object' && Object.values(v).forEach(visit));
  if (exp && typeof exp === 'object') visit(exp);
  else addEntry(exp);
  const files = new Set(['package.json']);
  for (const f of readdirSync(dir)) if (/^licen[cs]e/i.test(f)) files.add(f);
  const bare = new Set();
  const queue = [...entries].map(e => (existsSync(path.join(dir, e)) ? e : `${e}.js`));
  while (queue.length > 0) {
    const rel = queue.pop();
    if (files.has(rel) || !existsSync(path.join(dir, rel)) || /\.d\.[cm]?ts$/.test(rel)) continue;
    files.add(rel);
    if (!/\.[cm]?js$/.test(rel)) continue;
    for (const [, spec] of readFileSync(path.join(dir, rel), 'utf8').matchAll(SPECIFIERS)) {
      if (spec.startsWith('.')) {
        const target = path.normalize(path.join(path.dirname(rel), spec));
        for (const c of [target, `${target}.js`, path.join(target, 'index.js')])
          if (existsSync(path.join(dir, c)) && statSync(path.join(dir, c)).isFile()) queue.push(c);
      } else if (!BUILTIN.has(spec) && !BUILTIN.has(spec.split('/')[0])) bare.add(packageName(spec));
    }
  }
  return { files, bare };
}

/** Files besides the traced ones that a package loads by a computed path. */
function extraFiles(name, dir) {
  if (name === 'webgpu') return ['dist/linux-x64/dawn.node'];
  if (name === 'rxjs') return ['dist/bundles/rxjs.umd.js']; // what tandem loads of it (tools/cjs-shims.mjs)
  if (name === 'piscina') return walk(dir, 'dist').filter(f => /\.(c|m)?js$/.test(f)); // its worker, by path
  if (name === '@tensorflow/tfjs-backend-wasm') return walk(dir, 'dist').filter(f => f.endsWith('.wasm'));
  return [];
}

/** Copies the runtime closure of ENTRY_PACKAGES into stage/node_modules; returns the package names. */
function copyNodeModules(stage) {
  const { dependencies } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
  const unsaid = Object.keys(dependencies).filter(d => !ENTRY_PACKAGES.includes(d) && !NOT_AT_RUN_TIME.includes(d));
  if (unsaid.length > 0)
    fail(`package.json dependencies ${unsaid.join(', ')}: in neither ENTRY_PACKAGES nor NOT_AT_RUN_TIME (does the bundle need them?)`);
  const done = new Map();
  const queue = ENTRY_PACKAGES.map(name => ({ name, from: root }));
  while (queue.length > 0) {
    const { name, from } = queue.shift();
    const dir = packageDir(name, from);
    if (!dir) {
      if (ENTRY_PACKAGES.includes(name)) fail(`${name} is not installed (npm install)`);
      continue; // an optional require inside a try (e.g. msgpackr-extract's helpers): left out
    }
    if (done.has(dir)) continue;
    const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    const { files, bare } = packageFiles(dir, pkg);
    for (const f of extraFiles(name, dir)) files.add(f);
    done.set(dir, name);
    for (const f of files) copyInto(stage, path.relative(root, path.join(dir, f)), path.join(dir, f));
    for (const b of bare) queue.push({ name: b, from: dir });
  }
  return [...done.values()].sort();
}

function copyTandem(stage) {
  const dist = path.join(root, 'dist');
  if (!existsSync(path.join(dist, 'bench', 'gpu-check.js'))) fail('dist/bench/gpu-check.js is missing: npm run build');
  for (const f of walk(dist)) {
    if (!/^(src|bench)\//.test(f) || !f.endsWith('.js')) continue;
    copyInto(stage, path.join('dist', f));
  }
  copyInto(stage, 'package.json');
  for (const f of readdirSync(path.join(root, 'bench', 'torch'))) if (f.endsWith('.py')) copyInto(stage, `bench/torch/${f}`);
  const shm = 'native/shm/build/Release/tandem_shm.node';
  const notes = [];
  if (existsSync(path.join(root, shm))) copyInto(stage, shm);
  else notes.push(`no ${shm} (npm install builds it): tandem launch will need gloo, which the bundle lacks`);
  return notes;
}

/**
 * node.xz from this machine's node: compressing 99 MB takes minutes on two cores, so the result is kept in a cache
 * (TANDEM_GPU_BUNDLE_CACHE, else ~/.cache/tandem-gpu-bundle) keyed by the binary's version, size and time and the
 * level. TANDEM_GPU_BUNDLE_XZ_LEVEL (default 2) trades size for time: the CI test builds with 0, a bigger bundle
 * than the default's, so the size it checks bounds the default's too.
 */
function compressNode(dest) {
  const st = statSync(process.execPath);
  const level = process.env.TANDEM_GPU_BUNDLE_XZ_LEVEL ?? '2';
  if (!/^[0-9]$/.test(level)) fail(`TANDEM_GPU_BUNDLE_XZ_LEVEL must be a digit 0-9, got '${level}'`);
  const cacheDir = process.env.TANDEM_GPU_BUNDLE_CACHE ?? path.join(os.homedir(), '.cache', 'tandem-gpu-bundle');
  const cached = path.join(cacheDir, `node-xz${level}-${process.version}-${st.size}-${Math.floor(st.mtimeMs)}.xz`);
  if (!existsSync(cached)) {
    mkdirSync(cacheDir, { recursive: true });
    const tmp = mkdtempSync(path.join(cacheDir, 'tmp-'));
    copyFileSync(process.execPath, path.join(tmp, 'node'));
    run('xz', ['-T0', `-${level}`, path.join(tmp, 'node')]); // -2: a third of -6's time, 28 MB instead of 24
    copyFileSync(path.join(tmp, 'node.xz'), `${cached}.part`);
    renameSync(`${cached}.part`, cached);
    rmSync(tmp, { recursive: true, force: true });
  }
  copyFileSync(cached, dest);
}

function downloadDebs(dir) {
  mkdirSync(dir, { recursive: true });
  const tryDownload = extra => spawnSync('apt-get', [...extra, 'download', ...DEBS], { cwd: dir, encoding: 'utf8' });
  let r = tryDownload([]);
  if (r.status !== 0) {
    // No package lists here: the device README's recipe, lists in a folder of their own.
    const lists = mkdtempSync(path.join(os.tmpdir(), 'gpu-bundle-apt-'));
    mkdirSync(path.join(lists, 'partial'));
    const o = ['-oAPT::Architecture=amd64', '-oAPT::Architectures=amd64', `-oDir::State::Lists=${lists}`];
    run('apt-get', [...o, 'update', '-qq']);
    r = tryDownload(o);
    rmSync(lists, { recursive: true, force: true });
  }
  if (r.status !== 0) fail(`apt-get download ${DEBS.join(' ')} failed:\n${r.stderr}`);
  const debs = readdirSync(dir).filter(f => f.endsWith('.deb'));
  if (debs.length !== DEBS.length) fail(`expected ${DEBS.length} .deb files in ${dir}, found ${debs.join(', ')}`);
  return debs;
}

function main() {
  const out = parseOut(process.argv.slice(2));
  if (process.arch !== 'x64' || process.platform !== 'linux') fail(`needs linux-x64 (this is ${process.platform}-${process.arch})`);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const stage = mkdtempSync(path.join(os.tmpdir(), 'gpu-bundle-stage-'));
  try {
    const notes = copyTandem(stage);
    const packages = copyNodeModules(stage);
    run('tar', ['-C', stage, '-cf', path.join(out, 'tandem.tar'), '.']);
    run('xz', ['-T0', '-6', path.join(out, 'tandem.tar')]);
    compressNode(path.join(out, 'node.xz'));
    const debs = downloadDebs(path.join(out, 'debs'));
    copyFileSync(path.join(root, 'tools', 'gpu-check.sh'), path.join(out, 'gpu-check.sh'));
    chmodSync(path.join(out, 'gpu-check.sh'), 0o755);
    const files = walk(out);
    const sizes = files.map(f => [f, statSync(path.join(out, f)).size]);
    const total = sizes.reduce((s, [, n]) => s + n, 0);
    const manifest = [
      `tandem GPU check bundle, built ${new Date().toISOString()} with node ${process.version} (${process.execPath})`,
      `node_modules packages: ${packages.join(', ')}`,
      `debs: ${debs.join(', ')}`,
      ...notes,
      ...sizes.map(([f, n]) => `${(n / 1048576).toFixed(2).padStart(8)} MiB  ${f}`),
      `${(total / 1048576).toFixed(2).padStart(8)} MiB  total (limit ${LIMIT / 1048576} MiB)`,
    ].join('\n');
    writeFileSync(path.join(out, 'MANIFEST.txt'), manifest + '\n');
    console.log(manifest);
    if (total > LIMIT) fail(`the bundle is ${(total / 1048576).toFixed(1)} MiB, over ${LIMIT / 1048576} MiB`);
    console.log(`gpu-bundle: wrote ${out}; run it with: bash ${path.relative(process.cwd(), out) || '.'}/gpu-check.sh`);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

main();
