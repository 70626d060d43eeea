// `npm install` step: builds the optional native addon (native/) with node-gyp
// when oneDNN's headers are present (Debian/Ubuntu: apt-get install libdnnl-dev).
// Never fails the install: without oneDNN, or when the build fails, it prints
// one line and tandem runs on wasm. TANDEM_SKIP_NATIVE=1 skips it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const say = line => console.log(`tandem native: ${line}`);

function findHeader() {
  const dirs = [process.env.TANDEM_DNNL_INCLUDE, '/usr/include', '/usr/local/include'].filter(Boolean);
  return dirs.map(d => path.join(d, 'oneapi', 'dnnl', 'dnnl.hpp')).find(existsSync);
}

function findNodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ].filter(Boolean);
  return candidates.find(existsSync);
}

if (process.env.TANDEM_SKIP_NATIVE === '1') {
  say('skipped (TANDEM_SKIP_NATIVE=1); tandem will use wasm');
} else if (!findHeader()) {
  say('oneDNN headers not found (oneapi/dnnl/dnnl.hpp); tandem will use wasm. For the fast native path: apt-get install libdnnl-dev, then npm install again');
} else {
  const gyp = findNodeGyp();
  if (!gyp) {
    say('node-gyp not found (it ships with npm); tandem will use wasm');
  } else {
    const args = [gyp, 'rebuild'];
    if (process.env.npm_config_nodedir) args.push(`--nodedir=${process.env.npm_config_nodedir}`);
    const r = spawnSync(process.execPath, args, { cwd: here, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
    if (r.status === 0 && existsSync(path.join(here, 'build', 'Release', 'tandem_native.node'))) {
      say('built native/build/Release/tandem_native.node (oneDNN); the native backend is the default');
    } else {
      const tail = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').filter(l => !l.startsWith('gyp info')).slice(-8).join('\n  ');
      say(`build failed (exit ${r.status}); tandem will use wasm. Last lines:\n  ${tail}`);
    }
  }
}
