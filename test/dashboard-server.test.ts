// The dashboard's server as a stranger meets it, over real sockets: a malformed request target is answered 400 and the
// run goes on (it used to throw out of the request handler and end the process, before any token check), a client
// that never reads is dropped once far behind (the run's memory does not grow with it) while a reading one gets every
// message, past MAX_STREAMS pages are refused, a HEAD of the feed holds no page's place, and a port in use names the
// port and the flag that changes it.
import t from 'tap';
import net from 'node:net';
import { DashboardFeed, type DashboardMessage } from '../src/monitor/dashboard-feed.js';
import { MAX_STREAMS, MAX_UNSENT_BYTES, serveDashboard } from '../src/monitor/dashboard-server.js';

/** Sends `head` raw on a new connection to `port`; the connection, and everything it got until it closes. */
async function rawRequest(port: number, head: string): Promise<{ socket: net.Socket; text: () => string }> {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let got = '';
  socket.on('data', d => (got += d.toString('latin1')));
  socket.write(head);
  return { socket, text: () => got };
}

const closed = (s: net.Socket) => new Promise<void>(resolve => (s.closed ? resolve() : s.once('close', resolve)));
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

for (const host of ['127.0.0.1', '0.0.0.0']) {
  t.test(`${host}: a request target that is not a URL is answered 400, and the server goes on`, async t => {
    const server = await serveDashboard(new DashboardFeed(), { port: 0, host });
    t.teardown(() => server.close());
    for (const target of ['http://[', 'http://a:b:c/', '//[/']) {
      const head = `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nConnection: close\r\n\r\n`;
      const { socket, text } = await rawRequest(server.port, head);
      await closed(socket);
      t.match(text(), /^HTTP\/1\.1 400 /, `${target}: 400`);
    }
    const page = await fetch(server.url);
    t.equal(page.status, 200, 'the page is still served');
    await page.text();
  });
}

t.test('a client that never reads is dropped once far behind; a reading one gets every message', async t => {
  const feed = new DashboardFeed();
  const server = await serveDashboard(feed, { port: 0 });
  t.teardown(() => server.close());
  const head = `GET /events HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`;
  const stalled = await rawRequest(server.port, head);
  stalled.socket.pause();
  const reader = await rawRequest(server.port, head);
  await sleep(100);
  const message = 'x'.repeat(100_000);
  const event: DashboardMessage = { kind: 'event', event: { type: 'warning', step: 1, message } };
  const count = Math.ceil((4 * MAX_UNSENT_BYTES) / message.length);
  for (let i = 0; i < count; i++) {
    feed.publish(event);
    if (i % 20 === 0) await sleep(260); // past the server's 250 ms between writes
  }
  await sleep(600);
  stalled.socket.resume();
  const dropped = await Promise.race([closed(stalled.socket).then(() => true), sleep(5000).then(() => false)]);
  t.ok(dropped, 'the stalled client was dropped (the server no longer holds what it did not read)');
  t.ok(stalled.text().length < count * message.length, 'it got less than was published');
  stalled.socket.destroy();
  t.equal(reader.text().split(message).length - 1, count, 'the reading client got every message');
  reader.socket.destroy();
});

t.test(`past ${MAX_STREAMS} open pages a page is refused (503) until one closes`, async t => {
  const server = await serveDashboard(new DashboardFeed(), { port: 0 });
  t.teardown(() => server.close());
  const head = `GET /events HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`;
  const streams = [];
  for (let i = 0; i < MAX_STREAMS; i++) streams.push(await rawRequest(server.port, head));
  await sleep(200);
  t.ok(
    streams.every(s => s.text().startsWith('HTTP/1.1 200')),
    `${MAX_STREAMS} streams open`,
  );
  const extra = await rawRequest(server.port, head);
  await sleep(200);
  t.match(extra.text(), /^HTTP\/1\.1 503 [^]*pages are open already/);
  extra.socket.destroy();
  streams.pop()!.socket.destroy();
  await sleep(200);
  const again = await rawRequest(server.port, head);
  await sleep(200);
  t.match(again.text(), /^HTTP\/1\.1 200 /, 'one closed: the next is served');
  for (const s of [...streams, again]) s.socket.destroy();
});

t.test('a port in use: the error names the port and the flag of the command', async t => {
  const first = await serveDashboard(new DashboardFeed(), { port: 0 });
  t.teardown(() => first.close());
  await t.rejects(serveDashboard(new DashboardFeed(), { port: first.port }), {
    code: 'BAD_CONFIG',
    message: new RegExp(`127\\.0\\.0\\.1:${first.port}: .*EADDRINUSE.*another --dashboard PORT, or the flag alone`),
  });
  const flags = { port: '--port', host: '--host' };
  await t.rejects(serveDashboard(new DashboardFeed(), { port: first.port, flags }), {
    message: new RegExp(`EADDRINUSE.*another --port PORT, or --port 0 for a free one`),
  });
  await t.rejects(serveDashboard(new DashboardFeed(), { port: 0, host: '192.0.2.1' }), {
    message: /192\.0\.2\.1:0: .*EADDRNOTAVAIL.*give --dashboard-host an address of this machine/,
  });
});

t.test('a message is serialised once, however many pages get it', async t => {
  const feed = new DashboardFeed();
  const server = await serveDashboard(feed, { port: 0 });
  t.teardown(() => server.close());
  const head = `GET /events HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`;
  const pages = await Promise.all([0, 1, 2].map(() => rawRequest(server.port, head)));
  t.teardown(() => pages.forEach(p => p.socket.destroy()));
  await sleep(100);
  let serialised = 0;
  const message = 'serialised-once';
  const event = {
    type: 'warning',
    step: 1,
    message,
    toJSON: () => (serialised++, { type: 'warning', step: 1, message }),
  };
  feed.publish({ kind: 'event', event } as DashboardMessage);
  for (let waited = 0; waited < 5000 && !pages.every(p => p.text().includes(message)); waited += 50) await sleep(50);
  t.ok(
    pages.every(p => p.text().includes(message)),
    'all three pages got it',
  );
  const late = await rawRequest(server.port, head); // the snapshot a late page gets reuses the frame
  t.teardown(() => late.socket.destroy());
  for (let waited = 0; waited < 5000 && !late.text().includes(message); waited += 50) await sleep(50);
  t.ok(late.text().includes(message), 'a page that connected later got it too');
  t.equal(serialised, 1, 'JSON.stringify reached the message once');
});

t.test(`a HEAD of /events is answered at once and holds no page's place`, async t => {
  const server = await serveDashboard(new DashboardFeed(), { port: 0 });
  t.teardown(() => server.close());
  const answered = async (method: string) => {
    const r = await rawRequest(server.port, `${method} /events HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`);
    await new Promise<void>(resolve => {
      const check = () => (r.text().includes('\r\n\r\n') ? resolve() : r.socket.once('data', check));
      check();
    });
    return r;
  };
  const heads = [];
  for (let i = 0; i < MAX_STREAMS + 4; i++) heads.push(await answered('HEAD'));
  t.ok(
    heads.every(h => /^HTTP\/1\.1 200 [^]*content-type: text\/event-stream/i.test(h.text())),
    `${MAX_STREAMS + 4} HEADs answered 200, the feed's type`,
  );
  t.ok(
    heads.every(h => !/transfer-encoding: chunked/i.test(h.text()) || /\r\n0\r\n/.test(h.text())),
    'each answer complete',
  );
  const pages = [];
  for (let i = 0; i < MAX_STREAMS; i++) pages.push(await answered('GET'));
  t.ok(
    pages.every(p => p.text().startsWith('HTTP/1.1 200')),
    `then ${MAX_STREAMS} pages still open, the HEADs' connections open too`,
  );
  for (const s of [...heads, ...pages]) s.socket.destroy();
});
