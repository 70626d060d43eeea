// A step's kernels recorded and replayed (src/engine/kernel-trace.ts, src/engine/trace-replay.ts), on the native
// backend in this thread:
// - a replay on new inputs and a variable written since gives the bits tfjs gives for the same computation;
// - two recordings agree only when their constants are the same numbers and their calls the same;
// - a recording that read a tensor it did not mark, ran a kernel whose output shape depends on values, or during which
//   another variable was written, is refused;
// - a kernel that runs kernels is one call; the replay releases what its kernels made.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { startNativeAndStock } from './fixtures/native-compare.js';
import {
  markRead,
  releaseTrace,
  startRecording,
  traceMark,
  type KernelTrace,
  type TraceBackend,
} from '../src/engine/kernel-trace.js';
import { ReplayVariables, replayTrace, sameTrace } from '../src/engine/trace-replay.js';
import { sourceId } from '../src/engine/kernel-trace.js';

type Mark = { kind: 'out' } | { kind: 'read'; name: string };

const addon = await startNativeAndStock();
if (addon) registerTests();

function registerTests() {
  const backend = () => tf.backend() as unknown as TraceBackend;
  const w = tf.variable(tf.tensor2d([0.5, -1, 2, 0.25, 1.5, -0.75], [3, 2]), true, 'trace-w');
  const b = tf.variable(tf.tensor1d([0.1, -0.2]), true, 'trace-b');
  t.teardown(() => tf.dispose([w, b]));
  /** The computation recorded: a dense layer, relu, a scalar factor made outside kernels, its output marked. */
  const compute = (x: tf.Tensor, factor = 3) =>
    tf.tidy(() => {
      const y = tf.mul(tf.relu(tf.add(tf.matMul(x, w), b)), tf.scalar(factor));
      traceMark<Mark>({ kind: 'out' }, [y]);
      return y;
    });
  const record = (x: tf.Tensor, body: () => void, watched: tf.Variable[] = []) => {
    const r = startRecording<Mark>(backend(), [w, b], [x], watched);
    try {
      body();
    } catch (err) {
      r.finish();
      throw err;
    }
    return r.finish();
  };
  const traceOf = (x: tf.Tensor, factor = 3): KernelTrace<Mark> => {
    const result = record(x, () => compute(x, factor).dispose());
    if ('spoiled' in result) throw new Error(result.spoiled);
    return result;
  };
  const replayed = (trace: KernelTrace<Mark>, x: tf.Tensor): Float32Array => {
    let out: Float32Array | undefined;
    replayTrace(trace, backend(), {
      variables: new ReplayVariables(() => [w, b]),
      inputs: [x],
      onMark: (mark, tensors) => {
        if (mark.kind === 'out') out = (backend().data.get(tensors[0].dataId)!.values as Float32Array).slice();
      },
    });
    return out!;
  };

  t.test('a replay on new inputs and rewritten variables gives tfjs bits', t => {
    const x1 = tf.tensor2d([1, 2, 3, -1, 0.5, 4], [2, 3]);
    const trace = traceOf(x1);
    t.same(
      trace.calls.map(c => c.name),
      ['BatchMatMul', 'Add', 'Relu', 'Multiply'],
      'the top-level kernels, in order (a kernel that runs kernels is one call)',
    );
    const x2 = tf.tensor2d([-2, 1, 0.3, 2, -0.5, 1], [2, 3]);
    w.assign(tf.tensor2d([1, 2, -3, 0.5, 0.25, 2], [3, 2]));
    const before = tf.memory().numTensors,
      dataBefore = (tf.backend() as unknown as { numDataIds(): number }).numDataIds();
    const got = replayed(trace, x2);
    const want = compute(x2);
    t.same([...got], [...(want.dataSync() as Float32Array)], 'the same values as tfjs on the new inputs');
    t.ok(got.some(v => v > 0) && got.some(v => v === 0), 'relu cut some values and kept others');
    want.dispose();
    t.equal(tf.memory().numTensors, before, 'no tensor left by the replay');
    t.equal((tf.backend() as unknown as { numDataIds(): number }).numDataIds(), dataBefore, 'no data left by it');
    releaseTrace(trace, backend());
    tf.dispose([x1, x2]);
    t.end();
  });

  t.test("a variable outside the step's own, read by a kernel, is read as it is at the replay", t => {
    const frozen = tf.variable(tf.tensor1d([1, 2]), false, 'trace-frozen');
    const x = tf.tensor2d([1, 2, 3, -1, 0.5, 4], [2, 3]);
    const scaled = () =>
      tf.tidy(() => {
        const y = tf.mul(tf.matMul(x, w), frozen);
        traceMark<Mark>({ kind: 'out' }, [y]);
        return y;
      });
    const trace = record(x, () => scaled().dispose(), [frozen]);
    if ('spoiled' in trace) throw new Error(trace.spoiled);
    t.same(
      trace.calls[1].inputs.map(i => i.ref.kind),
      ['value', 'variable'],
      'the other variable is a variable of the recording, not a constant',
    );
    frozen.assign(tf.tensor1d([-3, 0.5])); // between steps (a moving average averaged over the devices)
    let got: Float32Array | undefined;
    replayTrace(trace, backend(), {
      variables: new ReplayVariables(() => [w, b, frozen]),
      inputs: [x],
      onMark: (_, tensors) => (got = (backend().data.get(tensors[0].dataId)!.values as Float32Array).slice()),
    });
    const want = scaled();
    t.same([...got!], [...(want.dataSync() as Float32Array)], 'its values now, as tfjs reads them');
    releaseTrace(trace, backend());
    tf.dispose([want, x, frozen]);
    t.end();
  });

  t.test("reshapes of the input's reshape, and kernels of a list of tensors: the input's data kept", t => {
    const x = tf.tensor2d([1, 2, 3, -1, 0.5, 4], [2, 3]);
    const body = (input: tf.Tensor) =>
      tf.tidy(() => {
        const flat = tf.reshape(tf.reshape(input, [6]), [3, 2]); // the input's data, twice over
        const y = tf.addN([tf.concat([flat, flat], 0), tf.concat([flat, tf.neg(flat)], 0)]); // inputs as lists
        traceMark<Mark>({ kind: 'out' }, [y]);
        return y;
      });
    const trace = record(x, () => body(x).dispose());
    if ('spoiled' in trace) throw new Error(trace.spoiled);
    t.same(
      trace.calls.map(c => c.name),
      ['Reshape', 'Reshape', 'Concat', 'Neg', 'Concat', 'AddN'],
      'the calls',
    );
    const x2 = tf.tensor2d([5, -6, 7, 8, 0, 1], [2, 3]);
    const got = replayed(trace, x2);
    const want = body(x2);
    t.same([...got], [...(want.dataSync() as Float32Array)], "tfjs's values");
    t.same([...(x2.dataSync() as Float32Array)], [5, -6, 7, 8, 0, 1], "the replay's input still holds its data");
    releaseTrace(trace, backend());
    tf.dispose([want, x, x2]);
    t.end();
  });

  t.test('two recordings agree only on the same calls and the same constants', t => {
    const x = tf.tensor2d([1, 2, 3, -1, 0.5, 4], [2, 3]);
    const [a, same, other] = [traceOf(x), traceOf(x), traceOf(x, 4)];
    t.ok(sameTrace(a, same), 'the same step twice: the same trace');
    t.notOk(sameTrace(a, other), 'a constant of other values (a step-dependent scalar): not the same');
    const bigger = tf.tensor2d([1, 2, 3, -1, 0.5, 4, 0, 1, 2], [3, 3]);
    const wider = traceOf(bigger);
    t.notOk(sameTrace(a, wider), 'other shapes: not the same');
    for (const tr of [a, same, other, wider]) releaseTrace(tr, backend());
    tf.dispose([x, bigger]);
    t.end();
  });

  t.test('a read it was not told of, or another variable written, refuses the recording', t => {
    const x = tf.tensor2d([1, 2, 3, -1, 0.5, 4], [2, 3]);
    const unmarked = record(x, () => compute(x).dataSync());
    t.same(unmarked, { spoiled: 'a tensor was read' }, 'an unmarked read of an output');
    const input = record(x, () => compute(tf.tensor2d(x.dataSync() as Float32Array, [2, 3])).dispose());
    t.same(input, { spoiled: 'a tensor was read' }, "an unmarked read of the step's input (a tensor made from it)");
    const marked = record(x, () => {
      const y = compute(x);
      markRead('y', y);
      y.dataSync();
      y.dispose();
    });
    t.notOk('spoiled' in marked, 'the same read, marked: kept');
    if (!('spoiled' in marked)) {
      t.same(
        marked.marks.map(m => m.mark),
        [{ kind: 'out' }, { kind: 'read', name: 'y' }],
        'the marks, in order',
      );
      releaseTrace(marked, backend());
    }
    const unique = record(x, () => tf.tidy(() => tf.unique(tf.reshape(compute(x), [-1])).values.dispose()));
    t.same(unique, { spoiled: "Unique's output shape depends on its input's values" }, 'a value-shaped kernel');
    const moving = tf.variable(tf.zeros([2]), false, 'trace-moving');
    const written = record(x, () => moving.assign(tf.tidy(() => tf.sum(compute(x), 0))), [moving]);
    t.same(written, { spoiled: 'the step wrote a variable' }, 'a moving average written in the step');
    const heldOutput = record(x, () => w.assign(tf.tidy(() => tf.add(w, tf.scalar(1)))));
    t.same(heldOutput, { spoiled: "a variable holds a kernel's output" }, "a variable given a kernel's output");
    tf.dispose([x, moving]);
    t.end();
  });
}

t.test('a replay finds its variables by id: kept, looked up again when one is replaced, named when gone', async t => {
  const a = tf.variable(tf.tensor1d([1, 2]));
  let b = tf.variable(tf.tensor1d([3]));
  let lookups = 0;
  const index = new ReplayVariables(() => {
    lookups++;
    return [a, b];
  });
  t.equal(index.dataId(sourceId(a)), a.dataId, 'found');
  t.equal(index.dataId(sourceId(b)), b.dataId);
  a.assign(tf.tensor1d([5, 6]));
  t.equal(index.dataId(sourceId(a)), a.dataId, "assigned: the variable's data now");
  t.equal(lookups, 1, 'indexed once for every lookup of known variables');
  const old = b;
  old.dispose();
  t.throws(() => index.dataId(sourceId(old)), /variable \d+ of the recording is not among the step's variables/);
  b = tf.variable(tf.tensor1d([7]));
  t.equal(index.dataId(sourceId(b)), b.dataId, 'a variable made since is found by indexing again');
  a.dispose();
  b.dispose();
});
