// tandem's rendezvous store (the TCP key/value store rank 0's process serves for Gloo's rendezvous):
// set/get/wait/add between clients, a get or wait that times out names the key, values are binary-safe,
// a malformed request closes only its connection, and the server closes itself after its clients left.
import t from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import { StoreClient, parseStoreUrl } from '../src/collectives/gloo/tcp-store-client.js';

t.test('set, get, wait and add between two clients; a waiting get is answered when the key is set', async t => {
  const server = await startStoreServer();
  t.teardown(() => server.close());
  t.match(server.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
  const a = await StoreClient.connect(server.url, 5000);
  const b = await StoreClient.connect(server.url, 5000);
  t.teardown(() => {
    a.close();
    b.close();
  });
  const waiting = b.get('rank/1'); // b asks before a sets: answered when it is set
  const waited = b.wait(['rank/1']);
  await a.set('rank/1', Buffer.from([0, 10, 255, 32, 10]));
  t.same([...(await waiting)], [0, 10, 255, 32, 10], 'binary value, newlines and spaces included');
  await waited;
  t.equal(await a.add('count', 1), 1);
  t.equal(await b.add('count', 2), 3);
  t.equal(await a.add('count', -3), 0);
  await a.set('key with spaces\nand a newline', 'v');
  t.equal((await b.get('key with spaces\nand a newline')).toString(), 'v', 'keys are binary-safe too');
});

t.test('a get or a wait that times out fails with STALLED naming the key', async t => {
  const server = await startStoreServer();
  t.teardown(() => server.close());
  const c = await StoreClient.connect(server.url, 200);
  t.teardown(() => c.close());
  await t.rejects(c.get('never/set'), { code: 'STALLED', message: /key 'never\/set' was not set within 200 ms/ });
  await t.rejects(c.wait(['also/never']), { code: 'STALLED', message: /key 'also\/never' was not set within 200 ms/ });
  await c.set('after', 'ok');
  t.equal((await c.get('after')).toString(), 'ok', 'the connection still serves after a timeout');
});

t.test(
  'a malformed request closes its connection only; the server closes itself after closeAfterClients came and went',
  async t => {
    // Without a secret every connection is admitted, and counts among the clients that close the server; with one,
    // these bytes would be refused at the handshake and not count (gloo-local-store.test.ts).
    const server = await startStoreServer({ closeAfterClients: 2, secret: null });
    const { host, port } = parseStoreUrl(server.url);
    const bad = net.connect({ host, port });
    await once(bad, 'connect');
    bad.write('FLY 0 1 1\nab');
    await once(bad, 'close');
    t.pass('the server closed the malformed connection');
    const good = await StoreClient.connect(server.url, 1000, null);
    await good.set('k', 'v');
    t.equal((await good.get('k')).toString(), 'v');
    good.close();
    await server.closed;
    t.pass('the server closed itself after its two clients disconnected');
    await t.rejects(StoreClient.connect(server.url, 1000), { code: 'STALLED', message: /unreachable/ });
  },
);

t.test('with a secret, a refused stranger does not count among the clients that close the server', async t => {
  const server = await startStoreServer({
    closeAfterClients: 1,
    secret: Buffer.from('a-secret-of-32-bytes-0123456789ab'),
  });
  const { host, port } = parseStoreUrl(server.url);
  const stranger = net.connect({ host, port });
  await once(stranger, 'connect');
  stranger.write('SET 0 1 1\nab'); // a request where the handshake belongs
  await once(stranger, 'close');
  const good = await StoreClient.connect(server.url, 1000, Buffer.from('a-secret-of-32-bytes-0123456789ab'));
  await good.set('k', 'v');
  t.equal((await good.get('k')).toString(), 'v', 'the one client the server waits for is served after the stranger');
  good.close();
  await server.closed;
  t.pass('the server closed itself once that client left');
});

t.test('a port already in use is refused with BAD_CONFIG naming it', async t => {
  const first = await startStoreServer();
  t.teardown(() => first.close());
  await t.rejects(startStoreServer({ port: first.port }), {
    code: 'BAD_CONFIG',
    message: new RegExp(`cannot listen on 127\\.0\\.0\\.1:${first.port}: .*EADDRINUSE.*another process holds`),
  });
});

t.test('store URLs: tcp://host:port and [v6] hosts; anything else is BAD_CONFIG', async t => {
  t.same(parseStoreUrl('tcp://10.0.0.1:29500'), { host: '10.0.0.1', port: 29500 });
  t.same(parseStoreUrl('tcp://[::1]:29500'), { host: '::1', port: 29500 });
  t.throws(() => parseStoreUrl('redis://x:1'), { code: 'BAD_CONFIG' });
});
