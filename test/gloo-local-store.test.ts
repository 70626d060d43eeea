// One process's gloo communicator (`--transport gloo` on one host) serves its ranks' store on 127.0.0.1, where any
// process of the machine can reach it: the store has a secret of its own, handed to the ranks in their handles. A
// stranger without it can neither write a key (the pairs' addresses are keys) nor read one, and its refused
// connections do not count among the ranks the store waits for (two of them used to close it before the ranks came).
import t from 'tap';
import { GLOO_TRANSPORT, type GlooRankData } from '../src/collectives/gloo-transport.js';
import { StoreClient } from '../src/collectives/gloo/tcp-store-client.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { checkCollectives, startRanks } from './fixtures/gloo-ranks.js';

if (glooAddonOrSkip()) {
  t.test("a stranger is refused by one process's store, and the ranks still meet", async t => {
    const options = { allReduce: 'sharded' } as const;
    const { handles } = await GLOO_TRANSPORT.prepare({
      name: 'gradients',
      size: 2,
      registered: [],
      stagingFloats: 0,
      options,
    });
    const data = handles[0].data as GlooRankData;
    t.match(data.secret, /^[A-Za-z0-9_-]{43}$/, 'a fresh secret of 32 random bytes in the handle');
    t.ok(
      handles.every(h => (h.data as GlooRankData).secret === data.secret),
      'every rank holds it',
    );
    for (const [who, secret] of [
      ['no secret', null],
      ['a wrong secret', Buffer.from('x'.repeat(32))],
    ] as const) {
      const stranger = await StoreClient.connect(data.store, 2000, secret).catch((err: Error) => err);
      if (stranger instanceof Error) {
        t.pass(`${who}: refused at the handshake (${stranger.message})`);
        continue;
      }
      try {
        await t.rejects(stranger.set(`${data.prefix}/0`, 'tcp://10.9.9.9:1'), `${who}: cannot write a key`);
      } finally {
        stranger.close();
      }
    }
    const run = await startRanks(2, 'collectives', data, { length: 1031 }).done;
    checkCollectives(t, run, "2 ranks with the store's secret, after two strangers");
  });
}
