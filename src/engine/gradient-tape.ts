/**
 * Gradient-ready events from one backward pass — the one module that uses
 * tfjs engine internals (pinned: @tensorflow/tfjs 4.22.0).
 *
 * The forward pass is recorded once on the engine's tape; the tape is then
 * walked in reverse exactly as tfjs's own `gradients` does (same per-node
 * gradient functions, same accumulation order, so bit-identical values), and
 * each variable's gradient is announced as soon as the walk has passed the
 * earliest tape node that reads the variable: no remaining node can add to it.
 * Nothing is recomputed. The forward saves what the gradients need without
 * tfjs's Identity kernel (`leanSaves`).
 */
import { TandemError } from '../errors.js';
import { releaseAllKept } from './kept-for-closure.js';
import { traceMark } from './kernel-trace.js';
import type { Tensor, Tf, Variable } from './tfjs-types.js';
import { withOutputDestination } from './output-destination.js';
import { NATIVE_BACKEND } from './native/backend-name.js';

interface TapeNode {
  id: number;
  kernelName: string;
  inputs: Record<string, Tensor>;
  outputs: Tensor[];
  gradient?: (dys: (Tensor | null)[]) => Record<string, () => Tensor>;
  saved?: Tensor[];
}

interface EngineInternals {
  startTape(): void;
  endTape(): void;
  scopedRun<T>(start: () => void, end: () => void, f: () => T): T;
  startScope(name?: string): void;
  endScope(result?: unknown): void;
  tidy<T>(nameOrFn: string, fn: () => T): T;
  state: {
    activeTape: TapeNode[] | null;
    gradientDepth: number;
    tensorInfo: WeakMap<object, { backend: { incRef?: (dataId: unknown) => void } }>;
  };
  /** The copy of a tensor tfjs saves for its gradient: the Identity kernel, and a tape node for it. */
  clone(x: Tensor): Tensor;
  makeTensorFromTensorInfo(info: { dataId: unknown; shape: number[]; dtype: string }, backend: unknown): Tensor;
}

/** The engine, checked to have the internals this module relies on. */
export function tapeInternals(tf: Tf): EngineInternals {
  const e = tf.engine() as unknown as Partial<EngineInternals>;
  const missing = (
    [
      'startTape',
      'endTape',
      'scopedRun',
      'startScope',
      'endScope',
      'tidy',
      'clone',
      'makeTensorFromTensorInfo',
    ] as const
  ).filter(k => typeof e[k] !== 'function');
  const tape = e.state?.activeTape;
  if (!e.state || typeof e.state.gradientDepth !== 'number' || (tape != null && !Array.isArray(tape)))
    missing.push('state.activeTape/gradientDepth' as never);
  if (!(e.state?.tensorInfo instanceof WeakMap)) missing.push('state.tensorInfo' as never);
  if (missing.length > 0) {
    throw new TandemError(
      'TFJS_INTERNALS',
      `tfjs ${tf.version_core} lacks the engine internals tandem's gradient-ready backward uses ` +
        `(${missing.join(', ')}). tandem is built against @tensorflow/tfjs 4.22.0: install that exact version.`,
    );
  }
  return e as EngineInternals;
}

/** Tape nodes on a path from some variable to y, inputs pruned to those that depend on a variable. */
function nodesFromVarsToY(tape: TapeNode[], vars: Tensor[], y: Tensor): TapeNode[] {
  const fromVars = new Set(vars.map(v => v.id));
  const reachable = new Set<number>();
  for (const node of tape) {
    if (Object.values(node.inputs).some(t => t != null && fromVars.has(t.id))) {
      reachable.add(node.id);
      for (const o of node.outputs) fromVars.add(o.id);
    }
  }
  const toY = new Set([y.id]);
  const leadsToY = new Set<number>();
  for (let i = tape.length - 1; i >= 0; i--) {
    const node = tape[i];
    if (node.outputs.some(o => toY.has(o.id))) {
      leadsToY.add(node.id);
      for (const t of Object.values(node.inputs)) if (t != null) toY.add(t.id);
    }
  }
  const out: TapeNode[] = [];
  for (const node of tape) {
    if (!reachable.has(node.id) || !leadsToY.has(node.id)) continue;
    const inputs: Record<string, Tensor> = {};
    for (const [name, t] of Object.entries(node.inputs)) if (t != null && fromVars.has(t.id)) inputs[name] = t;
    out.push({ ...node, inputs });
  }
  return out;
}

/**
 * Where `vars[index]`'s final gradient should be written (output-destination.ts), asked once the loss is known;
 * undefined: anywhere.
 */
export type GradientDestination = (index: number) => Float32Array | undefined;

/**
 * Runs `loss` forward once, then backward, calling `onReady(i, gradient)` for
 * each `vars[i]` as soon as its gradient is final (output layer first). The
 * gradient tensor is only valid during the callback. A variable the loss does
 * not depend on gets a zero gradient, after all others. Returns the loss
 * (the caller disposes it).
 */
export function backwardWithGradientReady(
  tf: Tf,
  loss: () => Tensor,
  vars: Variable[],
  onReady: (index: number, gradient: Tensor) => void,
  destination?: GradientDestination,
): Tensor {
  const engine = tapeInternals(tf);
  const lean = leanSaves(tf, engine),
    outer = lean.depth;
  const y = engine.scopedRun(
    () => {
      engine.startTape();
      lean.depth = engine.state.gradientDepth;
    },
    () => {
      lean.depth = outer;
      engine.endTape();
    },
    () => engine.tidy('forward', loss),
  );
  walkBackward(tf, engine, y, vars, onReady, destination);
  return y;
}

/** Where the engine saves tensors for the gradient without tfjs's Identity kernel: the tape depth of that forward. */
interface LeanSaves {
  depth: number | undefined;
}
const LEAN = new WeakMap<object, LeanSaves>();

/**
 * tfjs saves each tensor a gradient needs (26 in a mnist-node step, 47 in resnet-mini's) through `clone`: the Identity
 * kernel's full dispatch and two tape nodes, whose only use would be a gradient of that gradient. In the forward of
 * `backwardWithGradientReady`, on the cpu-based backends (whose Identity only adds a reference to the data), the
 * tensor is made directly on the same data: the same values, no kernel, no tape node. The backward walk that uses
 * them records nothing, so nothing could differentiate through them; a gradient taken inside that forward (a deeper
 * tape) keeps tfjs's clone. 0.16 ms of a bf16 mnist-node step on one core, 0.28 of resnet-mini's.
 */
function leanSaves(tf: Tf, engine: EngineInternals): LeanSaves {
  const known = LEAN.get(engine);
  if (known) return known;
  const lean: LeanSaves = { depth: undefined };
  LEAN.set(engine, lean);
  const stock = engine.clone.bind(engine);
  engine.clone = (x: Tensor) => {
    const backend = engine.state.tensorInfo.get(x.dataId)?.backend;
    const name = tf.getBackend();
    if (lean.depth !== engine.state.gradientDepth || (name !== 'cpu' && name !== NATIVE_BACKEND) || !backend?.incRef)
      return stock(x);
    backend.incRef(x.dataId); // what the cpu backend's Identity does
    return engine.makeTensorFromTensorInfo({ dataId: x.dataId, shape: x.shape, dtype: x.dtype }, backend);
  };
  return lean;
}

/**
 * `backwardWithGradientReady` with a forward that awaits reads (an engine without synchronous reads, where a
 * method needs values of the forward pass on the host before it can finish the loss: Partial FC). The tape
 * records and the forward's scope tracks across the awaits, as one synchronous forward would: nothing else
 * may run tensor operations on this thread meanwhile (a device's thread handles one message at a time).
 */
export async function backwardWithGradientReadyAsync(
  tf: Tf,
  loss: () => Promise<Tensor>,
  vars: Variable[],
  onReady: (index: number, gradient: Tensor) => void,
): Promise<Tensor> {
  const engine = tapeInternals(tf);
  engine.startTape();
  let y: Tensor | undefined;
  try {
    engine.startScope('forward');
    try {
      y = await loss();
    } finally {
      engine.endScope(y);
    }
  } finally {
    engine.endTape();
  }
  walkBackward(tf, engine, y, vars, onReady);
  return y;
}

/** A mark of a recorded step (kernel-trace.ts): the walk offered variable `index`'s slot (or stopped offering it). */
export type DestinationMark = { kind: 'destination'; index: number } | { kind: 'destinationEnd' };

/** `f` with `target` offered as its output's place (withOutputDestination), the offer marked in a recording. */
function offered(index: number, target: Float32Array, f: () => Tensor): Tensor {
  traceMark<DestinationMark>({ kind: 'destination', index });
  try {
    return withOutputDestination(target, f);
  } finally {
    traceMark<DestinationMark>({ kind: 'destinationEnd' });
  }
}

/** The reverse walk over the tape the forward that returned `y` recorded; releases the tape. */
function walkBackward(
  tf: Tf,
  engine: EngineInternals,
  y: Tensor,
  vars: Variable[],
  onReady: (index: number, gradient: Tensor) => void,
  destination?: GradientDestination,
): void {
  if (y.rank !== 0) throw new TandemError('BAD_CONFIG', `the loss must be a scalar, got shape [${y.shape.join(', ')}]`);
  const tape = engine.state.activeTape;
  if (!Array.isArray(tape))
    throw new TandemError(
      'TFJS_INTERNALS',
      'tfjs recorded no tape for the forward pass (engine.state.activeTape is not an array)',
    );
  try {
    const nodes = nodesFromVarsToY(tape, vars, y);
    // The earliest node (forward order) reading each variable: once the reverse walk passes it, the gradient is final.
    const readyAfter = new Map<number, number[]>();
    const unused: number[] = [];
    vars.forEach((v, index) => {
      const first = nodes.findIndex(n => Object.values(n.inputs).some(t => t.id === v.id));
      if (first < 0) return void unused.push(index);
      const list = readyAfter.get(first) ?? [];
      list.push(index);
      readyAfter.set(first, list);
    });
    engine.tidy('backward', () => {
      const acc = new Map<number, Tensor>([[y.id, tf.onesLike(y)]]);
      for (let i = nodes.length - 1; i >= 0; i--) {
        const node = nodes[i];
        if (!node.gradient)
          throw new Error(`Cannot compute gradient: gradient function not found for ${node.kernelName}.`);
        const grads = node.gradient(node.outputs.map(o => acc.get(o.id) ?? null));
        const ready = readyAfter.get(i);
        for (const [name, x] of Object.entries(node.inputs)) {
          if (!(name in grads)) throw new Error(`Cannot backprop through input ${name} of ${node.kernelName}.`);
          const current = acc.get(x.id);
          // the variable's last contribution, alone: its final gradient, which may be written where it goes
          const index = current === undefined && ready ? ready.find(k => vars[k].id === x.id) : undefined;
          const target = index === undefined ? undefined : destination?.(index);
          const dx = engine.tidy('grad', () => (target ? offered(index!, target, grads[name]) : grads[name]()));
          if (current === undefined) acc.set(x.id, dx);
          else {
            acc.set(x.id, tf.add(current, dx));
            current.dispose();
          }
        }
        for (const index of ready ?? []) onReady(index, acc.get(vars[index].id)!);
      }
      for (const index of unused) onReady(index, tf.zerosLike(vars[index]));
    });
  } finally {
    releaseAllKept();
    if (engine.state.gradientDepth === 0) {
      for (const node of tape) for (const t of node.saved ?? []) t.dispose();
      engine.state.activeTape = null;
    }
  }
}

/**
 * Runs `f` the way a training forward runs: with the tape recording (tfjs
 * then takes the unfused kernels it uses under gradients), then drops the
 * tape. For timing a forward pass as training sees it.
 */
export function forwardAsInTraining(tf: Tf, f: () => Tensor): Tensor {
  const engine = tapeInternals(tf);
  const y = engine.scopedRun(
    () => engine.startTape(),
    () => engine.endTape(),
    () => engine.tidy('forward', f),
  );
  const tape = engine.state.activeTape;
  if (engine.state.gradientDepth === 0 && Array.isArray(tape)) {
    for (const node of tape) for (const t of node.saved ?? []) t.dispose();
    engine.state.activeTape = null;
  }
  return y;
}

/**
 * The tape nodes a backward pass from `loss` to `vars` would need a gradient for and tfjs has none
 * (kernel name and position on the recorded tape, whose length is returned too). Runs the forward once.
 */
export function nodesWithoutGradient(
  tf: Tf,
  loss: () => Tensor,
  vars: Variable[],
): { missing: { kernelName: string; at: number; throws?: string }[] } {
  const engine = tapeInternals(tf);
  const y = engine.scopedRun(
    () => engine.startTape(),
    () => engine.endTape(),
    () => engine.tidy('forward', loss),
  );
  const tape = engine.state.activeTape;
  if (!Array.isArray(tape))
    throw new TandemError(
      'TFJS_INTERNALS',
      'tfjs recorded no tape for the forward pass (engine.state.activeTape is not an array)',
    );
  try {
    const nodes = nodesFromVarsToY(tape, vars, y);
    const needed = new Set(nodes.map(n => n.id));
    const missing = tape.flatMap((n, at) =>
      !needed.has(n.id)
        ? []
        : !n.gradient
          ? [{ kernelName: n.kernelName, at }]
          : Object.values(n.inputs).some(t => t == null)
            ? [
                {
                  kernelName: n.kernelName,
                  at,
                  throws:
                    "an input is undefined (an optional weight the layer does not have), which tfjs's gradient walk " +
                    'cannot pass',
                },
              ]
            : [],
    );
    return { missing: missing.length > 0 ? missing : throwingGradients(tf, tape, nodes) };
  } finally {
    releaseAllKept();
    if (engine.state.gradientDepth === 0) {
      for (const node of tape) for (const t of node.saved ?? []) t.dispose();
      engine.state.activeTape = null;
    }
    y.dispose();
  }
}

/**
 * Kernels whose gradient functions assert (dilation > 1) in their body before they return the closures, or do not
 * assert at all (the 2D pools), and whose closures only compute, on shapes the forward already checked: calling the
 * gradient function is enough. Their closures are the costly ones on the cpu backend (2 s for alexnet-mini's
 * convolutions on 2 samples, most of `fit`'s start), so they are not run.
 */
const ASSERTS_BEFORE_CLOSURES = new Set([
  'Conv2D',
  'Conv3D',
  'DepthwiseConv2dNative',
  'Conv2DBackpropInput',
  'MaxPool',
  'AvgPool',
]);

/**
 * The first of `nodes` whose gradient throws (tfjs asserts inside some gradient functions, e.g. Conv2D with
 * dilation > 1), found by running each one once on ones for its outputs' gradients: as a missing gradient.
 */
function throwingGradients(
  tf: Tf,
  tape: TapeNode[],
  nodes: TapeNode[],
): { kernelName: string; at: number; throws: string }[] {
  for (const node of nodes) {
    try {
      tf.tidy(() => {
        // as tfjs seeds a backward: float ones
        const grads = node.gradient!(node.outputs.map(o => tf.ones(o.shape, 'float32')));
        if (ASSERTS_BEFORE_CLOSURES.has(node.kernelName)) return;
        for (const name of Object.keys(node.inputs)) grads[name]?.();
      });
    } catch (e) {
      return [
        {
          kernelName: node.kernelName,
          at: tape.findIndex(n => n.id === node.id),
          throws: e instanceof Error ? e.message : String(e),
        },
      ];
    }
  }
  return [];
}

/** The current tape's length (nodes recorded so far), 0 when none is recording. */
export function tapeLength(tf: Tf): number {
  return tapeInternals(tf).state.activeTape?.length ?? 0;
}
