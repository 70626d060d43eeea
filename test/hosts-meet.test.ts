// HostChannel.meet on a real rendezvous store over TCP on 127.0.0.1: no host passes a meeting point before the last
// host reaches it (each host's arrival and departure times, compared), and a host that never comes is named with its
// address after the peer wait. auto's calibration run starts at such a point on every host (trainer/train.ts trialOf).
import t from 'tap';
import { HostChannel } from '../src/world/host-channel.js';
import { multiProcess } from '../src/world/topology.js';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import { TandemError } from '../src/errors.js';

const HOSTS = 3;
const PEER_WAIT_MS = 400;

async function channels(t: { teardown(fn: () => unknown): void }): Promise<HostChannel[]> {
  const server = await startStoreServer({ host: '127.0.0.1', port: 0 });
  const opened = await Promise.all(
    Array.from({ length: HOSTS }, (_, h) =>
      HostChannel.open(server.url, multiProcess(HOSTS, h, 1), 5000, PEER_WAIT_MS, `10.0.0.${h + 1}`),
    ),
  );
  t.teardown(async () => {
    for (const c of opened) c.close();
    await server.close();
  });
  return opened;
}

t.test('no host leaves a meeting point before the last one arrives', async t => {
  const hosts = await channels(t);
  for (const name of ['the calibration run', 'a second point']) {
    const arrived: number[] = [],
      left: number[] = [];
    // The hosts arrive 50 ms apart: a point that let a host through early would show it leaving before the last came.
    const waits: Promise<void>[] = [];
    for (const [h, c] of hosts.entries()) {
      if (h > 0) await new Promise(resolve => setTimeout(resolve, 50));
      arrived[h] = performance.now();
      waits.push(
        c.meet(name).then(() => {
          left[h] = performance.now();
        }),
      );
    }
    await Promise.all(waits);
    const lastArrival = Math.max(...arrived);
    t.ok(
      left.every(l => l >= lastArrival),
      `${name}: left at ${left.map(l => (l - lastArrival).toFixed(1)).join(', ')} ms after the last arrival`,
    );
  }
});

t.test('a host that never comes: STALLED after the peer wait, naming it and its address', async t => {
  const hosts = await channels(t);
  const errs = await Promise.all(
    [hosts[0], hosts[2]].map(c =>
      c.meet('the calibration run').then(
        () => undefined,
        (e: unknown) => e,
      ),
    ),
  );
  for (const err of errs) {
    t.ok(err instanceof TandemError && err.code === 'STALLED', 'STALLED');
    t.match((err as Error).message, /waited 0\.4 s for host 1 \(10\.0\.0\.2\) to reach the calibration run/);
  }
});
