/**
 * Per-group forward waits (`forwardWait: 'group'`): the compute thread's
 * forward pass waits for an exchange group of the previous step only just
 * before the first layer that uses it, and writes just that layer's variables
 * from the shared slot. Every layer of the model (nested models and wrappers
 * included) that owns a trainable variable gets its `call` wrapped once, at
 * attach time; the wrapper makes the layer's variables current before the
 * stock call (or tandem's fused/BatchNormalization calls) reads them.
 *
 * The math is unchanged: every variable is written with its fully updated
 * value before the first kernel that reads it. A variable no wrapped layer
 * owns (a custom layer reading a weight it does not hold) is made current
 * before the first layer runs, and whatever forward did not touch is made
 * current when it ends (`settle`), before the loss, the regularizers and
 * backward — so backward still writes gradients only after every group of the
 * previous step is applied, as with per-step waits.
 */
import { allLayers } from '../model/all-layers.js';
import type { ParameterGroup, ParameterLayout } from '../model/parameter-layout.js';
import type { LayersModel, LayerVariable, Tensor } from '../engine/tfjs-types.js';
import { traceMark } from '../engine/kernel-trace.js';
import type { PassMark } from './step-replay.js';

/** What the gate does to the outside world. */
export interface GateIo {
  /** Blocks until `group` of `step` is applied; false when it was applied already (no wait). */
  waitGroup(group: number, step: number): boolean;
  /** Writes layout variable `index` from the shared slot into the model. */
  writeVariable(index: number): void;
  /** A group wait that blocked, from `start` to `end` (wall clock), just before `layer` ran. */
  waited(group: number, start: number, end: number, layer: string): void;
}

interface CallableLayer {
  name: string;
  trainableWeights: LayerVariable[];
  call(inputs: Tensor | Tensor[], kwargs: Record<string, unknown>): Tensor | Tensor[];
  layers?: CallableLayer[];
  layer?: CallableLayer;
  forwardLayer?: CallableLayer;
  backwardLayer?: CallableLayer;
}

export class ForwardGate {
  /** Groups (indices) holding each layout variable. */
  private readonly groupsOf: number[][];
  /** Layout variables no wrapped layer owns: made current before the first layer. */
  private readonly unowned: number[];
  private readonly groupCount: number;
  private step = 0;
  private armed = false;
  private written: boolean[] = [];
  private current: boolean[] = [];

  constructor(
    private readonly layout: ParameterLayout,
    groups: readonly ParameterGroup[],
    owned: Set<number>,
    private readonly io: GateIo,
  ) {
    this.groupsOf = layout.variables.map(v =>
      groups.flatMap((g, gi) => (g.start < v.offset + v.size && v.offset < g.end ? [gi] : [])),
    );
    this.unowned = layout.variables.map((_, i) => i).filter(i => !owned.has(i));
    this.groupCount = groups.length;
  }

  /** The next forward needs the update of `ofStep`: nothing is current until waited for. */
  arm(ofStep: number): void {
    this.step = ofStep;
    this.armed = true;
    this.written = this.layout.variables.map(() => false);
    this.current = Array.from({ length: this.groupCount }, () => false);
  }

  /** Makes layout variables `indices` current before `layer` runs (the unowned ones too, the first time). */
  need(indices: readonly number[], layer: string): void {
    traceMark<PassMark>({ kind: 'need', indices, layer }); // a replayed step asks here too
    if (!this.armed) return;
    if (this.unowned.length > 0 && !this.written[this.unowned[0]]) this.make(this.unowned, layer);
    this.make(indices, layer);
  }

  /** Forward has ended: every variable current (what no layer used included); the gate is off until the next `arm`. */
  settle(): void {
    traceMark<PassMark>({ kind: 'settle' });
    if (!this.armed) return;
    this.make(
      this.layout.variables.map((_, i) => i),
      'the loss',
    );
    this.armed = false;
  }

  private make(indices: readonly number[], layer: string): void {
    for (const i of indices) {
      if (this.written[i]) continue;
      for (const g of this.groupsOf[i]) {
        if (this.current[g]) continue;
        const start = performance.timeOrigin + performance.now();
        if (this.io.waitGroup(g, this.step))
          this.io.waited(g, start, performance.timeOrigin + performance.now(), layer);
        this.current[g] = true;
      }
      this.io.writeVariable(i);
      this.written[i] = true;
    }
  }
}

/**
 * Wraps the `call` of every layer of `model` that owns a trainable variable of `layout` so that it asks `gate` for
 * its variables first. `byModelIndex[i]` is the layout index of `model.trainableWeights[i]`. Returns the layout
 * indices some wrapped layer owns (for the gate's `unowned`).
 */
export function wrapLayerCalls(
  model: LayersModel,
  byModelIndex: readonly number[],
  gate: () => ForwardGate,
): Set<number> {
  const index = new Map<LayerVariable, number>(model.trainableWeights.map((w, i) => [w, byModelIndex[i]]));
  const owned = new Set<number>();
  for (const layer of allLayers(model.layers as unknown as CallableLayer[])) {
    if (layer.layers !== undefined) continue; // a nested model: its own layers are wrapped
    const mine = layer.trainableWeights.flatMap(w => (index.has(w) ? [index.get(w)!] : []));
    if (mine.length === 0) continue;
    mine.forEach(i => owned.add(i));
    const stock = layer.call;
    layer.call = function (this: CallableLayer, inputs, kwargs) {
      gate().need(mine, layer.name);
      return stock.call(this, inputs, kwargs);
    };
  }
  return owned;
}

/** forwardWait 'group' on `model`: a gate whose `need` every layer holding parameters of `layout` calls first. */
export function gateModel(
  model: LayersModel,
  layout: ParameterLayout,
  groups: ParameterGroup[],
  byModelIndex: readonly number[],
  io: GateIo,
): ForwardGate {
  const made: { gate?: ForwardGate } = {};
  const owned = wrapLayerCalls(model, byModelIndex, () => made.gate!);
  made.gate = new ForwardGate(layout, groups, owned, io);
  return made.gate;
}
