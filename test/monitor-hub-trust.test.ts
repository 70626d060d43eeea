// Host 0's monitor hub on real loopback sockets (src/world/monitor-hub.ts, docs/guide/security.md): a stranger
// without the job secret, or with a wrong one, cannot forge a host's step, warning or end; an admitted connection is
// bound to the host its hello names, so a frame claiming another host (or `__proto__`), a second connection claiming a
// bound host, a non-finite loss, a string with terminal escapes and an oversize line each drop only their connection,
// logged naming the peer. The genuine hosts' steps still merge, in rank order, to the same values.
import t, { type Test } from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { MonitorHub, type WorldStep } from '../src/world/monitor-hub.js';
import { MonitorLink } from '../src/world/monitor-link.js';
import { encodeFrame, MAX_FRAME_BYTES, type MonitorFrame } from '../src/world/monitor-frames.js';
import { proveSecret } from '../src/world/job-secret.js';
import type { RunEvent } from '../src/monitor/run-event.js';

const SECRET = Buffer.from('the job secret of the hub test, 32+ bytes');
const WRONG = Buffer.from('not the job secret of the hub test at all');

const share = (step: number, loss: number) => ({
  step,
  losses: [loss],
  correct: 1,
  stepMs: 2,
  computeMs: [1],
  dataWaitMs: 0,
  numTensors: [3],
});

/** A hub of 3 hosts with the secret; what reached its sinks; a promise of its next log line. */
async function hub(t: Test, hosts = 3) {
  const steps: WorldStep[] = [];
  const events: RunEvent[] = [];
  const log: string[] = [];
  let wake: (() => void) | undefined;
  const h = await MonitorHub.listen(
    '127.0.0.1',
    hosts,
    { step: s => steps.push(s), spans: () => {}, event: e => events.push(e) },
    {
      secret: SECRET,
      log: line => {
        log.push(line);
        wake?.();
      },
    },
  );
  t.teardown(() => h.close());
  const logged = (n: number) =>
    new Promise<void>(resolve => {
      if (log.length >= n) return resolve();
      wake = () => log.length >= n && resolve();
    });
  return { h, steps, events, log, logged };
}

/** An admitted connection that sends raw frames (tagged, as a host's link would). */
async function admitted(port: number, secret = SECRET) {
  const socket = net.connect({ host: '127.0.0.1', port });
  await once(socket, 'connect');
  const { tags } = await proveSecret(socket, secret, 'hub', 2000);
  socket.resume();
  return {
    socket,
    send(frame: MonitorFrame | string) {
      const json = typeof frame === 'string' ? frame : encodeFrame(frame).slice(0, -1);
      socket.write(`${json}\t${tags.seal(json).toString('hex')}\n`);
    },
  };
}

t.test('strangers cannot forge a step; the genuine hosts merge as before', async t => {
  const { h, steps, events, log, logged } = await hub(t);
  // Without the secret: a plain line as the old protocol, claiming host 1's step and a warning with escapes.
  const plain = net.connect({ host: '127.0.0.1', port: h.port });
  await once(plain, 'connect');
  plain.write(encodeFrame({ type: 'step', host: 1, ...share(0, 99) }));
  await once(plain, 'close');
  await t.rejects(MonitorLink.connect('127.0.0.1', h.port, 2, WRONG), /the hub does not hold this job's secret/);
  await logged(1);
  t.match(log[0], /^the monitor hub refused 127\.0\.0\.1:\d+: it did not open with tandem's hub handshake/);
  const one = await MonitorLink.connect('127.0.0.1', h.port, 1, SECRET);
  const two = await MonitorLink.connect('127.0.0.1', h.port, 2, SECRET);
  h.share(0, share(0, 0.5));
  one.step(share(0, 1.5));
  two.step(share(0, 2.5));
  await one.end();
  await two.end();
  await h.ended(10_000);
  t.same(
    steps.map(s => s.losses),
    [[0.5, 1.5, 2.5]],
    "one world step of the three hosts' losses, in rank order",
  );
  t.same(events, [], 'no event from a stranger');
});

t.test('an admitted connection is bound to its hello: every forgery drops it, logged; the run goes on', async t => {
  const { h, events, log, logged } = await hub(t, 16);
  const genuine = await MonitorLink.connect('127.0.0.1', h.port, 1, SECRET);
  const forgeries: [string, (c: Awaited<ReturnType<typeof admitted>>) => void, RegExp][] = [
    [
      'a step before its hello',
      c => c.send({ type: 'step', host: 2, ...share(0, 9) }),
      /a 'step' frame before its hello/,
    ],
    ['host __proto__', c => c.send('{"type":"hello","host":"__proto__"}'), /frame\.host: not a host number/],
    ['a key __proto__', c => c.send('{"type":"hello","host":3,"__proto__":{}}'), /key "__proto__" refused/],
    ['host 0', c => c.send({ type: 'hello', host: 0 }), /not another host of this job \(1\.\.15\)/],
    ['a bound host', c => c.send({ type: 'hello', host: 1 }), /a second connection claiming host 1/],
    [
      'another host after its hello',
      c => {
        c.send({ type: 'hello', host: 4 });
        c.send({ type: 'step', host: 1, ...share(0, 9) });
      },
      /a frame claiming host 1 on host 4's connection/,
    ],
    [
      'an infinite loss',
      c => {
        c.send({ type: 'hello', host: 5 });
        c.send(
          '{"type":"step","host":5,"step":0,"losses":[1e999],"correct":1,"stepMs":2,"computeMs":[1],"numTensors":[3]}',
        );
      },
      /frame\.losses\[0\]: Infinity is not a finite number/,
    ],
    [
      'terminal escapes in a warning',
      c => {
        c.send({ type: 'hello', host: 6 });
        c.send({ type: 'event', host: 6, event: { type: 'warning', step: 0, message: 'ok\u001b[2J' } as RunEvent });
      },
      /frame\.event\.message: a string with control characters/,
    ],
    [
      'a line over the bound',
      c => c.socket.write('x'.repeat(MAX_FRAME_BYTES + 2)),
      /a line over the bound of \d+ bytes/,
    ],
    [
      'a changed tag',
      c => c.socket.write(`${encodeFrame({ type: 'hello', host: 2 }).slice(0, -1)}\t${'0'.repeat(64)}\n`),
      /tag does not match/,
    ],
  ];
  for (const [i, [name, forge, why]] of forgeries.entries()) {
    const c = await admitted(h.port);
    forge(c);
    await once(c.socket, 'close');
    await logged(i + 1);
    t.match(log[i], why, name);
    t.match(log[i], /^the monitor hub dropped 127\.0\.0\.1:\d+/, `${name}: the peer named`);
  }
  genuine.event({ type: 'warning', step: 0, message: 'still here' } as RunEvent);
  await genuine.end();
  await h.ended(100);
  t.match(events, [{ type: 'warning', host: 1, message: 'still here' }], "the genuine host's warning, as host 1's");
});
