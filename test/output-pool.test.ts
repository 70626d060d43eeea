// The native backend's output pool (src/engine/native/output-pool.ts): a kernel's output array comes back to the
// next output of its length once the tensor is disposed, zeroed; an array the caller owns, a view of an output, or an
// array handed out by dataSync() never does; and results are the same with recycled arrays as with fresh ones.
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { startBackend } from '../src/engine/backend.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';
import { OutputPool } from '../src/engine/native/output-pool.js';

/** The Float32Array the native backend holds for `x`, read without dataSync (which would pin it). */
function backing(x: tf.Tensor): Float32Array {
  const backend = tf.backend() as unknown as { data: { get(id: object): { values: Float32Array } } };
  return backend.data.get(x.dataId).values;
}

t.test(
  'the pool on its own: owned arrays come back zeroed; caller arrays, views and handed-out arrays never do',
  async t => {
    const pool = new OutputPool(1000);
    const a = pool.take(10);
    pool.stored(a);
    a.fill(7);
    pool.dropped(a);
    t.equal(pool.held, 10);
    const b = pool.take(10);
    t.equal(b, a, 'the dropped array is reused');
    t.same([...b], new Array(10).fill(0), 'and zeroed');
    pool.stored(b);
    b.fill(5);
    pool.dropped(b);
    const unzeroed = pool.take(10, false);
    t.equal(unzeroed, b, 'reused for an output the kernel writes whole');
    t.same([...unzeroed], new Array(10).fill(5), 'without the zeroing pass');
    pool.stored(unzeroed);
    pool.dropped(unzeroed);
    t.equal(pool.take(10), unzeroed, 'and back to the pool');
    const mine = new Float32Array(10);
    pool.stored(mine);
    pool.dropped(mine);
    t.equal(pool.held, 0, 'an array the pool did not make is never kept');
    const c = pool.take(10);
    pool.stored(c);
    pool.stored(c.subarray(2, 5)); // a view of it is stored as another tensor's data
    pool.dropped(c);
    t.equal(pool.held, 0, 'a viewed array is pinned');
    const d = pool.take(10);
    pool.stored(d);
    pool.pin(d); // dataSync handed it out
    pool.dropped(d);
    t.equal(pool.held, 0, 'a handed-out array is pinned');
    const big = pool.take(2000);
    pool.stored(big);
    pool.dropped(big);
    t.equal(pool.held, 0, 'beyond maxFloats the GC frees it');
  },
);

const addon = nativeAddonOrSkip();
if (addon) {
  t.test('aligned by the addon: arrays and shadows start on 64-byte boundaries and are still recycled', async t => {
    const at = (a: Float32Array | Uint16Array) => (addon.misalignment(a.buffer as ArrayBuffer) + a.byteOffset) % 64;
    const plain = new OutputPool(1 << 20);
    const misaligned = [1, 3, 7, 4096, 100_000].map(n => at(plain.take(n)));
    t.ok(
      misaligned.some(m => m !== 0),
      `without the addon, V8's own placement (${misaligned.join(', ')} bytes past a boundary)`,
    );
    const pool = new OutputPool(1 << 20);
    pool.alignWith(buffer => addon.misalignment(buffer));
    for (const n of [1, 3, 7, 16, 4096, 100_000, 524_288]) {
      const a = pool.take(n);
      t.equal(at(a), 0, `${n} floats: on a boundary`);
      t.equal(a.length, n);
      t.ok(
        a.every(v => v === 0),
        'zeroed',
      );
      pool.stored(a);
      const shadow = pool.shadowOf(a)!;
      t.equal(at(shadow.bits), 0, `its shadow: on a boundary`);
      t.equal(shadow.bits.length, n);
      pool.dropped(a);
      t.equal(pool.take(n), a, 'recycled: an aligned array counts as whole');
    }
    const c = pool.take(10);
    pool.stored(c);
    pool.stored(new Float32Array(c.buffer, c.byteOffset, 5)); // another view of its buffer: part of it
    pool.dropped(c);
    t.equal(pool.held, 0, 'another view of the buffer pins it');
    t.throws(() => addon.misalignment(new Float32Array(4) as never), /ArrayBuffer/, 'the addon names a wrong argument');
  });

  await startBackend(tf, 'native');
  await tf.setBackend('native');

  t.test('a disposed kernel output is recycled for the next output of its length; results are unchanged', async t => {
    const x = tf.randomUniform([4, 8, 8, 3], -1, 1, 'float32', 1);
    const w = tf.randomUniform([3, 3, 3, 5], -1, 1, 'float32', 2);
    const first = tf.conv2d(x as tf.Tensor4D, w as tf.Tensor4D, 1, 'same');
    const array = backing(first);
    const expected = [...array]; // not arraySync(): a read through dataSync would pin the array
    first.dispose();
    const second = tf.conv2d(x as tf.Tensor4D, w as tf.Tensor4D, 1, 'same');
    t.equal(backing(second), array, 'the same array, reused');
    t.same([...backing(second)], expected, 'the same result');
    tf.dispose([x, w, second]);
  });

  t.test('an array read through dataSync is never recycled: what the caller kept stays intact', async t => {
    const x = tf.randomUniform([64], -1, 1, 'float32', 3);
    const y = tf.relu(x);
    const kept = y.dataSync() as Float32Array;
    const copy = kept.slice();
    y.dispose();
    const z = tf.relu(tf.neg(x));
    t.not(backing(z), kept, 'a fresh array');
    t.same([...kept], [...copy], 'the kept values are unchanged');
    tf.dispose([x, z]);
  });

  t.test("a tensor made from the caller's array (a shared-memory view) is never recycled", async t => {
    const shared = new Float32Array(new SharedArrayBuffer(64 * 4)).fill(2);
    const s = tf.tensor(shared, [64]);
    const before = tf.relu(s);
    tf.dispose([s, before]);
    const after = tf.relu(tf.ones([64]));
    t.not(backing(after).buffer, shared.buffer, "the caller's memory is not handed to a kernel");
    t.same([...shared], new Array(64).fill(2), 'and is untouched');
    after.dispose();
  });
}
