// The rendezvous store's bounds (store-protocol.ts) on real loopback sockets: a request past the key length, the value
// size or the key count, a malformed ADD, or an over-long header drops its connection only, logged naming the peer and
// the bound; the store goes on serving its other clients. Seeded fuzzing: random request headers and random bytes
// (fast-check) never crash the server nor stop it answering. A large value arriving in many chunks reads back whole.
import t, { type Test } from 'tap';
import net from 'node:net';
import fc from 'fast-check';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import { StoreClient, parseStoreUrl } from '../src/collectives/gloo/tcp-store-client.js';
import { encodeRequest } from '../src/collectives/gloo/store-protocol.js';
import { proveSecret } from '../src/world/job-secret.js';

const SECRET = Buffer.from('the job secret of the bounds test, 32+ bytes');
const LIMITS = { maxKeyBytes: 16, maxValueBytes: 1024, maxKeys: 3 };

async function store(t: Test, secret: Buffer | null = SECRET) {
  const log: string[] = [];
  const server = await startStoreServer({ secret, log: line => log.push(line), limits: LIMITS });
  t.teardown(() => server.close());
  const own = await StoreClient.connect(server.url, 2000, secret);
  t.teardown(() => own.close());
  await own.set('own', 'kept');
  return { server, log, own, ...parseStoreUrl(server.url) };
}

/** An admitted connection writes `bytes` (tagged when `tagged`); resolves once the store closed it. */
async function send(port: number, secret: Buffer | null, bytes: Buffer, tagged = true): Promise<void> {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => {});
  await new Promise(resolve => socket.once('connect', resolve));
  const closed = new Promise(resolve => socket.once('close', resolve));
  if (secret) {
    const { tags } = await proveSecret(socket, secret, 'store', 2000);
    socket.resume();
    socket.write(tagged ? Buffer.concat([bytes, tags.seal(bytes)]) : bytes);
  } else {
    socket.resume();
    socket.write(bytes);
  }
  socket.end();
  await closed;
}

const req = (command: 'GET' | 'SET' | 'ADD', key: string, value: string | Buffer = '') =>
  encodeRequest({ command, timeoutMs: 0, key, value: Buffer.from(value) });

t.test('each bound drops the connection that passed it, logged naming the peer and the bound', async t => {
  const { log, own, port } = await store(t);
  const cases: [string, Buffer, RegExp][] = [
    ['a long key', req('SET', 'k'.repeat(17), 'v'), /a key of 17 bytes, over the bound of 16/],
    ['a large value', req('SET', 'k', 'v'.repeat(1025)), /a value of 1025 bytes, over the bound of 1024/],
    ['a malformed ADD', req('ADD', 'k', '1e9'), /an ADD of "1e9"/],
    ['a GET with a value', Buffer.from('GET 0 1 3\nkabc'), /a GET with a value/],
    ['a long header', Buffer.from('SET '.repeat(100)), /a header line over 256 bytes/],
    ['an unknown command', Buffer.from('FLY 0 1 1\nab'), /malformed store request "FLY 0 1 1"/],
  ];
  for (const [i, [name, bytes, why]] of cases.entries()) {
    await send(port, SECRET, bytes);
    t.match(log[i], /^the rendezvous store dropped 127\.0\.0\.1:\d+: /, `${name}: the peer named`);
    t.match(log[i], why, name);
  }
  await own.set('two', '2');
  await own.set('three', '3');
  await send(port, SECRET, req('SET', 'four', '4'));
  t.match(log.at(-1), /a SET of a new key past the bound of 3 keys/, 'the key count');
  await own.set('two', 'again');
  t.equal((await own.get('two')).toString(), 'again', 'a key already there may still be set');
  t.equal((await own.get('own')).toString(), 'kept', 'the store still serves its clients');
});

t.test('a value of many chunks reads back whole', async t => {
  const server = await startStoreServer({ secret: SECRET, log: () => {} });
  t.teardown(() => server.close());
  const a = await StoreClient.connect(server.url, 5000, SECRET);
  const b = await StoreClient.connect(server.url, 5000, SECRET);
  t.teardown(() => {
    a.close();
    b.close();
  });
  const value = Buffer.alloc(24 << 20);
  for (let i = 0; i < value.length; i += 4096) value[i] = (i >> 12) & 255;
  await a.set('big', value);
  t.ok((await b.get('big')).equals(value), '24 MiB, byte for byte');
});

t.test('fuzz: random headers and bytes never crash the store nor stop it serving (seeded)', async t => {
  for (const secret of [SECRET, null]) {
    const { log, own, port } = await store(t, secret);
    const header = fc
      .tuple(
        fc.constantFrom('SET', 'GET', 'WAIT', 'ADD', 'set', 'DEL', ''),
        fc.oneof(fc.nat(), fc.constant(-1), fc.constant(1e20), fc.string({ maxLength: 4 })),
        fc.oneof(fc.nat({ max: 40 }), fc.constant(2 ** 53)),
        fc.oneof(fc.nat({ max: 2000 }), fc.string({ maxLength: 3 })),
      )
      .map(parts => Buffer.from(`${parts.join(' ')}\n`));
    const request = fc.oneof(
      fc.tuple(header, fc.uint8Array({ maxLength: 64 })).map(([h, rest]) => Buffer.concat([h, rest])),
      fc.uint8Array({ minLength: 1, maxLength: 600 }).map(b => Buffer.from(b)),
    );
    await fc.assert(
      fc.asyncProperty(request, async bytes => {
        await send(port, secret, bytes);
        return (await own.get('own', 0)).toString() === 'kept';
      }),
      { seed: 32, numRuns: 60 },
    );
    t.ok(log.length > 0, `${secret ? 'with' : 'without'} a secret: refusals logged (${log.length})`);
  }
});
