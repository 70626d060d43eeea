// The job secret on real loopback sockets (src/world/job-secret.ts, docs/guide/security.md): host 0's rendezvous store
// admits a connection only once it proved the secret. A stranger without it (a raw socket speaking the store's
// protocol, a client without a secret) and one with a wrong secret can neither read nor write a key; each refusal is
// logged naming the peer's address, and the store goes on serving the job's own clients. A message whose tag is
// changed or replayed drops its connection. Host 0 proves the secret too: a store without it is refused. The addon's
// C++ client (the ranks' Gloo rendezvous) speaks the same handshake: it is refused by a store of another secret.
import t, { type Test } from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { createHmac, randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import { StoreClient, parseStoreUrl } from '../src/collectives/gloo/tcp-store-client.js';
import { encodeRequest } from '../src/collectives/gloo/store-protocol.js';
import { proveSecret, SECRET_ENV } from '../src/world/job-secret.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';

const SECRET = Buffer.from('the job secret of this test, 32+ bytes');
const WRONG = Buffer.from('another job secret entirely, 32+ bytes');

/** A store of SECRET holding `tandem.resume`, its log lines, and one admitted client. */
async function store(t: Test) {
  const log: string[] = [];
  const server = await startStoreServer({ secret: SECRET, log: line => log.push(line) });
  t.teardown(() => server.close());
  const own = await StoreClient.connect(server.url, 2000, SECRET);
  t.teardown(() => own.close());
  await own.set('tandem.resume', 'the checkpoint bytes');
  return { server, log, own, ...parseStoreUrl(server.url) };
}

/** Everything a raw socket receives after writing `bytes`, until the server closes it. */
async function rawExchange(host: string, port: number, bytes: Buffer | string): Promise<Buffer> {
  const socket = net.connect({ host, port });
  await once(socket, 'connect');
  const got: Buffer[] = [];
  socket.on('data', (c: Buffer) => got.push(c));
  socket.write(bytes);
  await once(socket, 'close');
  return Buffer.concat(got);
}

t.test('a stranger speaking the store protocol without the secret reads nothing and writes nothing', async t => {
  const { server, log, own, host, port } = await store(t);
  for (const request of [
    encodeRequest({ command: 'GET', timeoutMs: 0, key: 'tandem.resume', value: Buffer.alloc(0) }),
    encodeRequest({ command: 'SET', timeoutMs: 0, key: 'tandem.resume', value: Buffer.from('poison') }),
    encodeRequest({ command: 'ADD', timeoutMs: 0, key: 'tandem.stop.3', value: Buffer.from('65536') }),
  ]) {
    const answer = await rawExchange(host, port, request);
    t.equal(answer.length, 0, `no answer to ${request.subarray(0, 4).toString()}: the connection was closed`);
  }
  t.equal((await own.get('tandem.resume')).toString(), 'the checkpoint bytes', 'the key is unchanged');
  await t.rejects(own.get('tandem.stop.3', 0), /was not set/, 'the stop counter was never added to');
  t.equal(log.length, 3, 'each refusal logged');
  for (const line of log)
    t.match(line, /^the rendezvous store refused 127\.0\.0\.1:\d+: it did not open with tandem's store handshake/);
  await t.rejects(
    StoreClient.connect(server.url, 1000, null).then(c => c.get('tandem.resume', 0)),
    {
      code: 'STALLED',
      message: /closed the connection/,
    },
  );
  t.equal(log.length, 4, 'a client without a secret is refused and logged too');
});

t.test('a peer with a wrong secret fails the challenge; a store with a wrong one is refused by the client', async t => {
  const { server, log, own, host, port } = await store(t);
  // A stranger answering the challenge with another secret's HMAC (the store's own proof it ignores).
  const socket = net.connect({ host, port });
  await once(socket, 'connect');
  const cn = randomBytes(32).toString('hex');
  socket.write(`TANDEM-AUTH 1 store ${cn}\n`);
  const [answer] = (await once(socket, 'data')) as [Buffer];
  const sn = answer.toString('latin1').split(' ')[0];
  socket.write(`${createHmac('sha256', WRONG).update(`store client ${cn} ${sn}`).digest('hex')}\n`);
  await once(socket, 'close');
  t.match(log, [/refused 127\.0\.0\.1:\d+: it failed the challenge: its job secret is not this job/]);
  t.equal((await own.get('tandem.resume')).toString(), 'the checkpoint bytes', 'the job still served');
  // A client of the wrong secret finds host 0's proof wrong and leaves before proving anything.
  await t.rejects(StoreClient.connect(server.url, 1000, WRONG), {
    code: 'BAD_CONFIG',
    message: /the store does not hold this job's secret .*TANDEM_JOB_SECRET or --job-secret-file/,
  });
  const impostor = await startStoreServer({ secret: WRONG, log: () => {} });
  t.teardown(() => impostor.close());
  await t.rejects(StoreClient.connect(impostor.url, 1000, SECRET), {
    code: 'BAD_CONFIG',
    message: /the store does not hold this job's secret/,
  });
});

t.test('a changed or replayed message drops its connection; the other clients go on', async t => {
  const { log, own, host, port } = await store(t);
  for (const attack of ['changed', 'replayed'] as const) {
    const socket = net.connect({ host, port });
    await once(socket, 'connect');
    const { tags } = await proveSecret(socket, SECRET, 'store', 2000);
    const got: Buffer[] = [];
    socket.on('data', (c: Buffer) => got.push(c));
    socket.resume();
    const request = encodeRequest({ command: 'SET', timeoutMs: 0, key: 'x', value: Buffer.from('1') });
    const tag = tags.seal(request);
    if (attack === 'changed') {
      const forged = Buffer.from(request);
      forged[forged.length - 1] ^= 1;
      socket.write(Buffer.concat([forged, tag]));
    } else socket.write(Buffer.concat([request, tag, request, tag]));
    await once(socket, 'close');
    const replies = Buffer.concat(got).toString('latin1');
    t.equal(replies.split('OK 0\n').length - 1, attack === 'changed' ? 0 : 1, `${attack}: answered only the genuine`);
  }
  t.equal(log.filter(l => /dropped 127\.0\.0\.1:\d+: a message whose tag does not match/.test(l)).length, 2);
  t.equal((await own.get('x')).toString(), '1', 'the genuine SET went through once');
});

if (glooAddonOrSkip()) {
  t.test("the addon's C++ store client proves the secret, and is refused by a store of another", async t => {
    for (const [secret, ok] of [
      [Buffer.from(process.env[SECRET_ENV]!), true],
      [WRONG, false],
    ] as const) {
      const log: string[] = [];
      let logged = (): void => {};
      const firstLine = new Promise<void>(resolve => (logged = resolve));
      const server = await startStoreServer({
        secret,
        log: line => {
          log.push(line);
          logged();
        },
      });
      t.teardown(() => server.close());
      const worker = new Worker(
        `const { workerData, parentPort } = require('node:worker_threads');
         const addon = require(workerData.addon);
         const ctx = new addon.GlooContext({ rank: 0, size: 1, store: workerData.store, prefix: 'p',
           hostname: '127.0.0.1', timeoutMs: 3000 });
         try { ctx.connect(); parentPort.postMessage('connected'); } catch (e) { parentPort.postMessage(e.message); }
         ctx.close();`,
        {
          eval: true,
          workerData: {
            addon: new URL('../../native/gloo/build/Release/tandem_gloo.node', import.meta.url).pathname,
            store: server.url,
          },
          execArgv: [],
        },
      );
      const [said] = (await once(worker, 'message')) as [string];
      await once(worker, 'exit');
      if (ok) t.equal(said, 'connected', "the job's secret: admitted");
      else {
        t.match(said, /does not hold this job's secret/, 'another secret: the store is refused by the rank');
        await firstLine; // the store sees the rank's connection close after the rank has said so
        t.match(log, [/refused 127\.0\.0\.1:\d+/], 'and the store refuses the rank');
      }
    }
  });
}
