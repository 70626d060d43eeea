// The hosts' stop agreement (HostChannel.submitStop / stopAgreed) on a real rendezvous store over TCP on 127.0.0.1:
// every host reads the same verdict (stop when any host wished to); a host whose wish never came is named with its
// address; a host that added the last wish but did not publish the verdict (its link cut between the two writes)
// is named too. The verdicts against a rule computed here, host by host.
import t from 'tap';
import { HostChannel } from '../src/world/host-channel.js';
import { multiProcess } from '../src/world/topology.js';
import { startStoreServer, type StoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import { StoreClient } from '../src/collectives/gloo/tcp-store-client.js';
import { TandemError } from '../src/errors.js';

const HOSTS = 3;
const PEER_WAIT_MS = 400;

async function world(
  t: Pick<typeof import('tap').default, 'teardown'>,
): Promise<{ server: StoreServer; channels: HostChannel[] }> {
  const server = await startStoreServer({ host: '127.0.0.1', port: 0 });
  const channels = await Promise.all(
    Array.from({ length: HOSTS }, (_, h) =>
      HostChannel.open(server.url, multiProcess(HOSTS, h, 1), 5000, PEER_WAIT_MS, `10.0.0.${h + 1}`),
    ),
  );
  t.teardown(async () => {
    for (const c of channels) c.close();
    await server.close();
  });
  return { server, channels };
}

t.test('every host reads the same verdict: stop when any host wished to', async t => {
  const { channels } = await world(t);
  const wishes: boolean[][] = [
    [false, false, false],
    [false, true, false],
    [true, true, true],
    [false, false, true],
  ];
  for (const [step, wanted] of wishes.entries()) {
    await Promise.all(channels.map((c, h) => c.submitStop(step, wanted[h])));
    const verdicts = await Promise.all(channels.map(c => c.stopAgreed(step)));
    t.same(
      verdicts,
      channels.map(() => wanted.some(w => w)),
      `step ${step}, wishes ${wanted.join(' ')}: ${verdicts.join(' ')}`,
    );
  }
});

t.test('a wish that never came: STALLED after the peer wait, naming the host and its address', async t => {
  const { channels } = await world(t);
  await Promise.all([channels[0].submitStop(4, false), channels[2].submitStop(4, false)]);
  const err = await channels[0].stopAgreed(4).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof TandemError && err.code === 'STALLED', 'STALLED');
  t.match((err as Error).message, /host 1 \(10\.0\.0\.2\) did not add its stop wish after step 4 within 0\.4 s/);
});

t.test('every wish in, no verdict: the host that added last is named', async t => {
  const { server, channels } = await world(t);
  await Promise.all([channels[0].submitStop(7, false), channels[1].submitStop(7, true)]);
  // Host 2's wish, as its submitStop writes it, cut before the verdict: the count and its own key, then nothing.
  const cut = await StoreClient.connect(server.url, 5000);
  t.teardown(() => cut.close());
  const count = await cut.add('tandem.stop.7', 1);
  await cut.set('tandem.stop.7.host2', String(count));
  const err = await channels[1].stopAgreed(7).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof TandemError && err.code === 'STALLED', 'STALLED');
  t.match(
    (err as Error).message,
    /host 2 \(10\.0\.0\.3\) added the last stop wish but did not publish the verdict after step 7/,
  );
});
