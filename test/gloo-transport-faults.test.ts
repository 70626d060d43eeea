// The gloo transport when a peer fails: a peer whose thread exits or whose process is killed (PEER_LOST naming it), a
// peer that hangs (STALLED at the timeout), and a rendezvous missing a rank (STALLED naming the store key).
import t from 'tap';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { checkCollectives, startRanks, storeFor } from './fixtures/gloo-ranks.js';

if (glooAddonOrSkip()) {
  t.test('a peer whose thread exits: the survivor fails with PEER_LOST naming the peer rank', async t => {
    const run = await startRanks(
      2,
      rank => (rank === 0 ? 'all-reduce-after-join' : 'exit-after-join'),
      await storeFor(2),
      { length: 1 << 16 },
    ).done;
    const err = run.replies[0].find(m => m.type === 'error');
    if (err?.type !== 'error') {
      t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
      return;
    }
    t.equal(err.error.code, 'PEER_LOST');
    t.match(
      err.error.message,
      /peer rank 1 \(\[127\.0\.0\.1\]:\d+\)/,
      `the message names the peer: ${err.error.message}`,
    );
    t.comment(`failed ${err.afterMs} ms after the operation started`);
  });

  t.test('a peer process killed with SIGKILL: the survivor fails with PEER_LOST naming the peer rank', async t => {
    const data = await storeFor(2);
    const survivor = startRanks(2, 'all-reduce-after-join', data, { only: [0], length: 1 << 16 });
    const child = spawn(
      process.execPath,
      [fileURLToPath(new URL('./fixtures/gloo-rank-process.js', import.meta.url)), '1', '2', data.store, data.prefix],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const exited = once(child, 'exit');
    const [joined] = (await once(child.stdout!, 'data')) as [Buffer];
    t.equal(joined.toString(), 'joined\n', 'the peer process joined');
    const killedAt = Date.now();
    child.kill('SIGKILL');
    const run = await survivor.done;
    const seenAfter = Date.now() - killedAt;
    t.same(await exited, [null, 'SIGKILL']);
    const err = run.replies[0].find(m => m.type === 'error');
    if (err?.type !== 'error') {
      t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
      return;
    }
    t.equal(err.error.code, 'PEER_LOST');
    t.match(err.error.message, /lost peer rank 1 .*peer rank 1 \(\[127\.0\.0\.1\]:\d+\)/, err.error.message);
    t.comment(`the survivor's thread had ended ${seenAfter} ms after the kill`);
  });

  t.test(
    'a peer that hangs: the survivor fails with STALLED at the timeout, and the hanging rank ends when let go',
    async t => {
      const ranks = startRanks(
        2,
        rank => (rank === 0 ? 'all-reduce-after-join' : 'hang-after-join'),
        await storeFor(2),
        { timeoutMs: 1000 },
      );
      const w0 = once(ranks.workers[0], 'exit');
      await w0;
      Atomics.store(ranks.gate, 0, 1);
      Atomics.notify(ranks.gate, 0);
      const run = await ranks.done;
      const err = run.replies[0].find(m => m.type === 'error');
      if (err?.type !== 'error') {
        t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
        return;
      }
      t.equal(err.error.code, 'STALLED');
      t.match(err.error.message, /peer rank 1 did not answer within 1\.0 s/, err.error.message);
      t.ok(err.afterMs >= 900, `failed ${err.afterMs} ms after the operation started, at the 1 s timeout or later`);
      t.ok(
        err.heartbeats >= 5,
        `the waiting rank beat its heartbeat ${err.heartbeats} times while Gloo waited (the watchdog sees it alive)`,
      );
    },
  );

  t.test(
    'a rendezvous missing a rank fails with STALLED naming the store key it waited for; a communicator of one needs ' +
      'no peer',
    async t => {
      const run = await startRanks(2, 'collectives', await storeFor(2), { timeoutMs: 800, only: [0] }).done;
      const err = run.replies[0].find(m => m.type === 'error');
      if (err?.type !== 'error') {
        t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
        return;
      }
      t.equal(err.error.code, 'STALLED');
      t.match(err.error.message, /could not join communicator .*key '[^']+' was not set within/, err.error.message);
      t.comment(`failed after ${err.afterMs} ms`);
      checkCollectives(t, await startRanks(1, 'collectives', await storeFor(1), { length: 5 }).done, '1 rank');
    },
  );
}
