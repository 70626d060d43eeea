// emulateLink: the comm side is held until the exchange has lasted as long as
// a ring all-reduce of the group would on the modelled link, counted from the
// start of the exchange. Only lower bounds on time are asserted.
import t from 'tap';
import { Subject } from 'rxjs';
import { emulateLink } from '../../src/pipeline/operators/emulate-link.js';
import { allReduceWireMs, parseLink, type LinkModel } from '../../src/pipeline/link-model.js';
import { wallNow } from '../../src/monitor/span.js';
import type { ParameterGroup } from '../../src/model/parameter-layout.js';
import type { GroupExchange } from '../../src/pipeline/events.js';

// Epoch-based timestamps (~1.7e12 ms) round to ~0.2 µs: allow 1 µs of rounding in the lower bounds.
const ROUNDING_MS = 1e-3;

const groups: ParameterGroup[] = [
  { name: 'fc', start: 0, end: 200_000 }, // 800 kB
  { name: 'conv', start: 200_000, end: 250_000 }, // 200 kB
];

/** Runs units through emulateLink and collects what comes out, with the error or completion. */
function through(link: LinkModel, devices: number, units: GroupExchange[], end: 'complete' | Error = 'complete') {
  const source = new Subject<GroupExchange>();
  const out: GroupExchange[] = [];
  let error: unknown,
    completed = false;
  source.pipe(emulateLink(link, devices, groups)).subscribe({
    next: u => out.push(u),
    error: e => {
      error = e;
    },
    complete: () => {
      completed = true;
    },
  });
  // A unit given an exchangeStart (any value) gets "now" as its start: the exchange begins as it arrives.
  for (const u of units) source.next({ ...u, exchangeStart: u.exchangeStart === undefined ? undefined : wallNow() });
  if (end === 'complete') source.complete();
  else source.error(end);
  return { out, error, completed };
}

const unit = (step: number, group: number, exchangeStart?: number): GroupExchange => ({
  step,
  group,
  waitStart: 10,
  waitEnd: 11,
  ...(exchangeStart === undefined ? {} : { exchangeStart }),
});

t.test('each unit leaves no earlier than exchangeStart + the modelled ring all-reduce time of its group', async t => {
  const link = parseLink('1gbps:2ms'); // fc on 2 devices: 6.4 ms on the wire + 2 ms latency
  for (const devices of [2, 4]) {
    const units = [unit(1, 0, 0), unit(1, 1, 0), unit(2, 0, 0)];
    const { out, completed, error } = through(link, devices, units);
    t.equal(out.length, 3, `${devices} devices: every unit comes out`);
    t.strictSame(
      out.map(u => [u.step, u.group]),
      [
        [1, 0],
        [1, 1],
        [2, 0],
      ],
      'in arrival order',
    );
    for (const u of out) {
      const { start, end } = groups[u.group];
      const modelled = allReduceWireMs(link, (end - start) * 4, devices);
      t.ok(modelled > link.latencyMs, `modelled ${modelled.toFixed(2)} ms`);
      t.type(u.exchangeStart, 'number');
      t.type(u.exchangeEnd, 'number');
      const held = u.exchangeEnd! - u.exchangeStart!;
      t.ok(
        held >= modelled - ROUNDING_MS,
        `${devices} devices, group ${u.group}: exchange lasted ${held.toFixed(2)} ms >= ${modelled.toFixed(2)} ms ` +
          `modelled`,
      );
      t.equal(u.waitStart, 10);
      t.equal(u.waitEnd, 11);
    }
    t.equal(completed, true, 'completion passes through');
    t.equal(error, undefined);
  }
});

t.test(
  "the modelled time is the ring all-reduce of the group's bytes: 2(N-1)/N of them on the wire, plus latency",
  async t => {
    // The same number, computed by hand: fc is 800 kB; 4 devices put 1.5 x 800 kB = 1.2 MB = 9.6 Mbit on the wire.
    const link = parseLink('1gbps:0.5ms');
    t.ok(Math.abs(allReduceWireMs(link, 800_000, 4) - 10.1) < 1e-9, 'allReduceWireMs agrees: 10.1 ms');
    const { out } = through(link, 4, [unit(1, 0, 0)]);
    t.ok(
      out[0].exchangeEnd! - out[0].exchangeStart! >= 10.1 - ROUNDING_MS,
      `held ${(out[0].exchangeEnd! - out[0].exchangeStart!).toFixed(2)} ms >= 10.1 ms`,
    );
  },
);

t.test("without an exchangeStart the hold counts from the unit's arrival", async t => {
  const link = parseLink('500mbps'); // conv on 2 devices: 200 kB = 1.6 Mbit -> 3.2 ms
  const modelled = allReduceWireMs(link, 200_000, 2);
  const before = wallNow();
  const { out } = through(link, 2, [unit(3, 1)]);
  t.equal(out.length, 1);
  t.ok(
    out[0].exchangeEnd! - before >= modelled - ROUNDING_MS,
    `left ${(out[0].exchangeEnd! - before).toFixed(2)} ms after arrival >= ${modelled.toFixed(2)} ms`,
  );
});

t.test('time already spent in the exchange counts: an exchange that began long ago is not held again', async t => {
  // Modelled at 20 s; the exchange began 40 s ago, so no hold is due. Counting from the unit's arrival instead
  // would hold the thread for 20 s by construction: the bound below is that logical one (20 s), not a timing of the
  // machine, and a regression costs 20 s, not a hang.
  const link: LinkModel = { bandwidth: 1e9, latencyMs: 20_000, label: 'slow:20s' };
  const modelled = allReduceWireMs(link, 200_000, 2);
  const source = new Subject<GroupExchange>();
  const out: GroupExchange[] = [];
  source.pipe(emulateLink(link, 2, groups)).subscribe(u => out.push(u));
  const began = wallNow() - 2 * modelled;
  const arrived = wallNow();
  source.next(unit(1, 1, began));
  t.equal(out.length, 1);
  t.equal(out[0].exchangeStart, began, 'exchangeStart kept');
  t.ok(
    out[0].exchangeEnd! - began >= modelled - ROUNDING_MS,
    'the end is still at least the modelled time after the start',
  );
  t.ok(out[0].exchangeEnd! - arrived < modelled, `not held another ${(modelled / 1000).toFixed(0)} s from arrival`);
});

t.test('one device: nothing on the wire, no hold; exchangeEnd still set', async t => {
  const link = parseLink('1mbps:1000ms');
  t.equal(allReduceWireMs(link, 800_000, 1), 0);
  const { out } = through(link, 1, [unit(1, 0, 0)]);
  t.equal(out.length, 1);
  t.ok(out[0].exchangeEnd! >= out[0].exchangeStart!, 'exchangeEnd >= exchangeStart');
});

t.test('errors pass through, after the units before them; nothing after', async t => {
  const link = parseLink('10gbps');
  const source = new Subject<GroupExchange>();
  const out: GroupExchange[] = [];
  let error: unknown,
    completed = false;
  source.pipe(emulateLink(link, 2, groups)).subscribe({
    next: u => out.push(u),
    error: e => {
      error = e;
    },
    complete: () => {
      completed = true;
    },
  });
  source.next(unit(1, 0, wallNow()));
  source.error(new Error('exchange failed'));
  source.next(unit(1, 1, wallNow()));
  t.strictSame(
    out.map(u => u.group),
    [0],
  );
  t.match(error, { message: 'exchange failed' });
  t.equal(completed, false);
});
