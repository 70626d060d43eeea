// hostShare (src/data/host-share.ts): each host's share of every global batch of a stream of samples, in batches of
// batch / hosts, is the part shardRange gives it (the last, smaller global batch included), and the shares of all
// hosts are every sample once; a batch the hosts do not divide is refused naming the fix.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { hostShare } from '../src/index.js';

const samples = (n: number) => tf.data.array(Array.from({ length: n }, (_, i) => i)).map(i => tf.scalar(i as number));

async function batchesOf(ds: tf.data.Dataset<tf.TensorContainer>): Promise<number[][]> {
  const out: number[][] = [];
  await ds.forEachAsync(b => void out.push(Array.from((b as tf.Tensor).dataSync())));
  return out;
}

t.test('2 hosts, batch 8, 44 samples: blocks of 4, the last global batch of 4 split 2 + 2', async t => {
  const host0 = await batchesOf(hostShare(samples(44), { batch: 8, hostRank: 0, hosts: 2 }));
  const host1 = await batchesOf(hostShare(samples(44), { batch: 8, hostRank: 1, hosts: 2 }));
  t.same(host0, [0, 8, 16, 24, 32].map(f => [f, f + 1, f + 2, f + 3]).concat([[40, 41]]));
  t.same(host1, [4, 12, 20, 28, 36].map(f => [f, f + 1, f + 2, f + 3]).concat([[42, 43]]));
});

t.test('3 hosts, a last global batch of 5: shares of 1, 2 and 2', async t => {
  const shares = await Promise.all(
    [0, 1, 2].map(hostRank => batchesOf(hostShare(samples(11), { batch: 6, hostRank, hosts: 3 }))),
  );
  t.same(
    shares.map(s => s[s.length - 1]),
    [[6], [7, 8], [9, 10]],
  );
  t.same(
    shares.flat(2).sort((a, b) => a - b),
    Array.from({ length: 11 }, (_, i) => i),
    'every sample once',
  );
});

t.test('one process: whole batches; a batch the hosts do not divide is refused', async t => {
  t.same(await batchesOf(hostShare(samples(5), { batch: 4 })), [[0, 1, 2, 3], [4]]);
  t.throws(() => hostShare(samples(5), { batch: 8, hostRank: 0, hosts: 3 }), {
    code: 'BAD_CONFIG',
    message: /multiple/,
  });
  t.throws(() => hostShare(samples(5), { hostRank: 0, hosts: 2 }), { code: 'BAD_CONFIG', message: /options/ });
});
