// `npm install` step: builds tandem's optional native addons with node-gyp, each
// only when its library's headers are present, and never fails the install:
// without them, or when a build fails, it prints one line and tandem runs
// without that addon.
// - native/binding.gyp → tandem_native.node, the oneDNN kernels (apt-get install
//   libdnnl-dev); without it tandem runs on wasm. TANDEM_SKIP_NATIVE=1 skips it.
// - native/gloo/binding.gyp → tandem_gloo.node, the gloo transport (apt-get install
//   libgloo-dev); without it tandem runs on one host (shared memory). TANDEM_SKIP_GLOO=1 skips it.
// - native/shm/binding.gyp → tandem_shm.node, the shm transport between processes of one machine
//   (POSIX shared memory and futexes: Linux and libc only); without it processes of one machine
//   talk over TCP loopback (gloo). TANDEM_SKIP_SHM=1 skips it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
// Runs this step again: `npm rebuild tandem` where tandem is a project's dependency (`npm install` there does not run an
// installed dependency's install script again), `npm install` in tandem's own checkout (as src/addon-load.ts says it).
const again = here.split(/[\\/]/).includes('node_modules') ? 'npm rebuild tandem' : 'npm install';

const ADDONS = [
  {
    name: 'native', dir: here, output: 'tandem_native.node', skip: 'TANDEM_SKIP_NATIVE', includeEnv: 'TANDEM_DNNL_INCLUDE',
    header: path.join('oneapi', 'dnnl', 'dnnl.hpp'), library: 'oneDNN', without: 'tandem will use wasm',
    missing: `tandem will use wasm. For the fast native path: apt-get install libdnnl-dev, then ${again}`,
    built: 'built native/build/Release/tandem_native.node (oneDNN); the native backend is the default',
  },
  {
    name: 'gloo', dir: path.join(here, 'gloo'), output: 'tandem_gloo.node', skip: 'TANDEM_SKIP_GLOO', includeEnv: 'TANDEM_GLOO_INCLUDE',
    header: path.join('gloo', 'rendezvous', 'context.h'), library: 'Gloo', without: 'the gloo transport is unavailable (one host only)',
    missing: `the gloo transport is unavailable (one host only). For it: apt-get install libgloo-dev, then ${again}`,
    built: "built native/gloo/build/Release/tandem_gloo.node (Gloo); transport 'gloo' is available",
  },
  {
    name: 'shm', dir: path.join(here, 'shm'), output: 'tandem_shm.node', skip: 'TANDEM_SKIP_SHM', includeEnv: 'TANDEM_SHM_INCLUDE',
    header: path.join('linux', 'futex.h'), library: 'Linux futex', without: "the shm transport is unavailable (processes of one machine use 'gloo' over loopback)",
    missing: "the shm transport is unavailable (processes of one machine use 'gloo' over loopback); it needs Linux (linux/futex.h, the linux-libc-dev package)",
    built: "built native/shm/build/Release/tandem_shm.node (POSIX shared memory, futexes); transport 'shm' is available",
  },
];

function findHeader(addon) {
  const dirs = [process.env[addon.includeEnv], '/usr/include', '/usr/local/include'].filter(Boolean);
  return dirs.map(d => path.join(d, addon.header)).find(existsSync);
}

function findNodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ].filter(Boolean);
  return candidates.find(existsSync);
}

function build(addon) {
  const say = line => console.log(`tandem ${addon.name}: ${line}`);
  if (process.env[addon.skip] === '1') return say(`skipped (${addon.skip}=1); ${addon.without}`);
  if (!findHeader(addon)) return say(`${addon.library} headers not found (${addon.header}); ${addon.missing}`);
  const gyp = findNodeGyp();
  if (!gyp) return say(`node-gyp not found (it ships with npm); ${addon.without}`);
  const args = [gyp, 'rebuild'];
  if (process.env.npm_config_nodedir) args.push(`--nodedir=${process.env.npm_config_nodedir}`);
  const r = spawnSync(process.execPath, args, { cwd: addon.dir, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (r.status === 0 && existsSync(path.join(addon.dir, 'build', 'Release', addon.output))) return say(addon.built);
  const tail = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').filter(l => !l.startsWith('gyp info')).slice(-8).join('\n  ');
  say(`build failed (exit ${r.status}); ${addon.without}. Last lines:\n  ${tail}`);
}

for (const addon of ADDONS) build(addon);
