// tandem as a user gets it: `npm pack`'s file list (what `npm install tandem` unpacks into node_modules/tandem) and
// what a project that depends on tandem is told to run. The tarball holds what runs — the compiled library and its
// worker scripts, the `tandem` command, the native sources and the install step that builds them — and nothing of
// the repository's own (tests, benches, their compiled copies, CI scripts: they were shipped, 1,571 files, 6.3 MB).
// Every relative import and worker URL in the shipped code resolves to a shipped file, and every package it imports
// is a dependency (through package.json "imports" too: '#tfjs' and its neighbours).
import tap from 'tap';
import { execFile } from 'node:child_process';
import { builtinModules } from 'node:module';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { rebuildCommand, REBUILD_COMMAND } from '../src/addon-load.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  name: string;
  license: string;
  main: string;
  types: string;
  bin: Record<string, string>;
  dependencies: Record<string, string>;
  imports: Record<string, { types: string; default: string }>;
};

/** `npm pack --dry-run`'s file list (no scripts: the build ran before the tests). */
const packed = new Promise<string[]>((resolve, reject) =>
  execFile(
    'npm',
    ['pack', '--dry-run', '--json', '--ignore-scripts'],
    { cwd: root, timeout: 60_000, maxBuffer: 64 << 20 },
    (err, stdout) => {
      if (err) return reject(err);
      const [report] = JSON.parse(stdout) as { files: { path: string }[] }[];
      resolve(report.files.map(f => f.path));
    },
  ),
);

tap.test(
  'the tarball holds the library, its types, the command, the native sources and install step, the README and the ' +
    'license',
  async t => {
    const files = new Set(await packed);
    const need = [
      'package.json',
      'README.md',
      'LICENSE',
      path.posix.normalize(pkg.main),
      path.posix.normalize(pkg.types),
      'dist/src/cli/main.js',
      ...Object.values(pkg.bin).map(b => path.posix.normalize(b)),
      'native/build-addon.mjs',
      'native/binding.gyp',
      'native/gloo/binding.gyp',
      'native/shm/binding.gyp',
      'native/src/addon.cc',
      'native/src/gloo-addon.cc',
      'native/src/shm-addon.cc',
      'examples/mnist.json',
    ];
    for (const f of need) t.ok(files.has(f), `${f} is in the tarball`);
    // Every source a binding.gyp compiles is shipped (the install step builds from them).
    for (const gyp of ['native/binding.gyp', 'native/gloo/binding.gyp', 'native/shm/binding.gyp']) {
      const sources = [...readFileSync(path.join(root, gyp), 'utf8').matchAll(/"([^"]+\.cc)"/g)].map(m =>
        path.posix.join(path.posix.dirname(gyp), m[1]),
      );
      t.ok(sources.length > 0, `${gyp} names its sources`);
      for (const s of sources) t.ok(files.has(s), `${gyp}: ${s} is in the tarball`);
    }
  },
);

tap.test(
  "the tarball holds none of the repository's own files: tests, benches, their compiled copies, builds, CI",
  async t => {
    const files = await packed;
    const stray = files.filter(
      f =>
        /^(dist\/(test|bench)\/|test\/|bench\/|src\/|native\/(.*\/)?build\/|\.ci\/|scratch\/|out\/|docs\/)/.test(f) ||
        ['tsconfig.json', '.dependency-cruiser.cjs', 'package-lock.json'].includes(f),
    );
    t.same(stray, [], "nothing of the repository's own");
    // each src module ships as .js, .d.ts and a source map; the rest (bin, native sources, examples, README) is
    // under 100 files: a tarball past that holds something else
    const modules = readdirSync(path.join(root, 'src'), { recursive: true }).filter(f =>
      String(f).endsWith('.ts'),
    ).length;
    t.ok(files.length < 3 * modules + 100, `${files.length} files (${modules} src modules)`);
  },
);

tap.test(
  'every relative import and worker URL in the shipped code names a shipped file; every package it imports is a ' +
    'dependency',
  async t => {
    const files = new Set(await packed);
    const code = [...files].filter(f => f.startsWith('dist/src/') && (f.endsWith('.js') || f.endsWith('.d.ts')));
    t.ok(code.length > 100, `${code.length} shipped modules and type files`);
    const missing: string[] = [];
    const undeclared = new Set<string>();
    const builtins = new Set(builtinModules);
    for (const f of code) {
      const text = readFileSync(path.join(root, f), 'utf8');
      const specifiers = [
        ...[...text.matchAll(/(?:\bfrom|\bimport\(|^import)\s*['"]([^'"]+)['"]/gm)].map(m => m[1]),
        ...[...text.matchAll(/new URL\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*,\s*import\.meta\.url/g)].map(m => m[1]),
      ];
      for (const s of specifiers) {
        if (s.startsWith('.')) {
          const target = path.posix.normalize(path.posix.join(path.posix.dirname(f), s));
          // The native addons (.node) are built at install, from the shipped sources; a folder (`../..`) is no file.
          // dist/tsconfig.tsbuildinfo: the compile's record, absent from a package on purpose (src/bundled-entry.ts).
          const optional = target.endsWith('.node') || target === 'dist/tsconfig.tsbuildinfo';
          if (!optional && !/(^|\/)\.{1,2}\/?$/.test(s) && !files.has(target)) missing.push(`${f}: ${s}`);
        } else if (s.startsWith('#')) {
          // package.json "imports" (tools/cjs-shims.mjs): its module shipped, the package it loads a dependency
          const entry = pkg.imports[s];
          if (!entry) undeclared.add(`${f}: ${s} (not in package.json "imports")`);
          else if (!files.has(path.posix.normalize(entry.default))) missing.push(`${f}: ${s} -> ${entry.default}`);
          else if (!(entry.types in pkg.dependencies)) undeclared.add(`${f}: ${s} -> ${entry.types}`);
        } else if (!s.startsWith('node:') && !builtins.has(s)) {
          const name = s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0];
          // tandem itself: a comment's example of what a plugin imports.
          if (name !== pkg.name && !(name in pkg.dependencies)) undeclared.add(`${f}: ${s}`);
        }
      }
    }
    t.same(missing, [], 'no relative import or worker URL names a file the tarball lacks');
    t.same([...undeclared], [], 'every package the shipped code imports is in dependencies');
  },
);

tap.test(
  'a missing native addon says the command that builds it where this tandem is: npm rebuild tandem in a project ' +
    'that depends on it',
  async t => {
    t.equal(rebuildCommand('/home/me/app/node_modules/tandem'), 'npm rebuild tandem', 'installed as a dependency');
    t.equal(
      rebuildCommand('C:\\app\\node_modules\\tandem'),
      'npm rebuild tandem',
      'installed as a dependency (Windows path)',
    );
    t.equal(rebuildCommand('/home/me/src/tandem'), 'npm install', 'its own checkout');
    t.equal(REBUILD_COMMAND, rebuildCommand(root), 'this copy');
    const { NATIVE_HOW_TO } = await import('../src/engine/native/native-addon.js');
    const { GLOO_HOW_TO } = await import('../src/collectives/gloo/gloo-addon.js');
    const { SHM_HOW_TO } = await import('../src/collectives/shm/shm-addon.js');
    for (const [name, how] of [
      ['native', NATIVE_HOW_TO],
      ['gloo', GLOO_HOW_TO],
      ['shm', SHM_HOW_TO],
    ]) {
      t.ok(how.includes(REBUILD_COMMAND), `${name}: '${how}' names ${REBUILD_COMMAND}`);
      t.notMatch(
        how,
        /npm install again/,
        `${name}: not 'npm install again' (in a project that depends on tandem it builds nothing)`,
      );
    }
    // The install step's own lines say the same (it is shipped and runs from node_modules/tandem/native).
    const step = readFileSync(path.join(root, 'native/build-addon.mjs'), 'utf8');
    t.notMatch(step, /npm install again/, "build-addon.mjs: no 'npm install again'");
    t.match(step, /npm rebuild tandem/, 'build-addon.mjs: npm rebuild tandem where tandem is a dependency');
  },
);

tap.test('the license the package names is the one it ships', async t => {
  t.equal(pkg.license, 'Apache-2.0');
  const text = readFileSync(path.join(root, 'LICENSE'), 'utf8');
  t.match(text, /Apache License\s+Version 2\.0, January 2004/, 'LICENSE is the Apache License 2.0');
  t.match(text, /END OF TERMS AND CONDITIONS/, 'whole: to the end of its terms');
});
