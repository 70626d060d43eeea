// A host that dies between two steps, real processes and sockets on 127.0.0.1: host 1 kills itself with SIGKILL as
// it makes its stop wish after step 3, its main thread held up 300 ms first (test/fixtures/dying-host.ts: tiny steps,
// so its devices run the step already posted, with host 0's). Host 0 must end with PEER_LOST naming host 1 at once,
// from the next step's all-reduce, never wait for host 1's wish in the store until the peer wait (2 × stallTimeoutMs,
// 20 s there: STALLED; so it did before the fix, 3 trials of 3). Each host adds its
// wish after step s before it posts step s+1 (run-controller.ts wishAfter). Every process is torn down.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { freePort } from '../src/world/launch.js';

const HOST = fileURLToPath(new URL('./fixtures/dying-host.js', import.meta.url));

const live = new Set<ChildProcess>();
t.teardown(() => {
  for (const c of live) c.kill('SIGKILL');
});

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
}

function host(rank: number, rendezvous: string, dieAfter: number): Promise<Ended> {
  const child = spawn(process.execPath, [HOST, String(rank), rendezvous, String(dieAfter)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  return once(child, 'exit').then(([code, signal]) => {
    live.delete(child);
    return { code, signal, out, err };
  });
}

if (glooAddonOrSkip()) {
  for (let trial = 1; trial <= 3; trial++) {
    t.test(
      `trial ${trial}: host 1 killed as it wishes after step 3; host 0 ends PEER_LOST naming it, not STALLED`,
      async t => {
        const rendezvous = `127.0.0.1:${await freePort()}`;
        const t0 = performance.now();
        const [h0, h1] = await Promise.all([host(0, rendezvous, 0), host(1, rendezvous, 3)]);
        const seconds = (performance.now() - t0) / 1000;
        t.equal(h1.signal, 'SIGKILL', 'host 1 killed itself');
        t.equal(h0.code, 1, 'host 0 failed');
        const result = JSON.parse(h0.out.trim().split('\n').at(-1) ?? '{}') as { code?: string; message?: string };
        t.equal(result.code, 'PEER_LOST', `host 0: ${result.code}: ${result.message ?? h0.err.slice(-400)}`);
        t.match(result.message, /\bhost 1\b|\brank 1\b/, 'naming host 1');
        t.comment(
          `both ended in ${seconds.toFixed(1)} s (host 0's peer wait is 20 s; waiting it out ends STALLED, not ` +
            `PEER_LOST)`,
        );
      },
    );
  }
}
