/**
 * A dataset's `read(index, out, offset)` gets `out` = a view of exactly one
 * sample (offset 0), never the shared buffer of a whole batch: a read that
 * writes past its sample cannot reach a neighbour's (which made runs differ).
 * Writing past a typed array is silently dropped, so the first read of each
 * reader of a user module (one per shard and step) goes through a watching
 * view (a proxy: ~60x slower, hence once) that fails loudly on such a write;
 * `out.set(values, offset)` past the end throws by itself and is named too.
 * Before each read the view is filled with a NaN whose bits no arithmetic
 * makes (UNWRITTEN): an element still holding it afterwards was not written
 * (a sample shorter than sampleShape), which would otherwise train on the
 * previous batch's values; any other NaN or ±Infinity is a non-finite input.
 * Both are BAD_DATA naming the sample, on every read (loaders, sample 0 on
 * the main thread, the held-out evaluation).
 */
import { fileURLToPath } from 'node:url';
import { TandemError } from '../errors.js';
import { sampleSize, type Dataset } from './dataset.js';

export class SampleReader {
  readonly sampleFloats: number;
  /** Whether the next read is watched: the first one of a user module's reader (builtins are tandem's own code). */
  private watchNext: boolean;

  private readonly source: string;

  /** `source` (a builtin name or a module URL) names the dataset in errors. */
  constructor(
    private readonly ds: Dataset,
    source: string,
  ) {
    this.sampleFloats = sampleSize(ds.sampleShape);
    this.watchNext = source.startsWith('file:');
    this.source = this.watchNext ? fileURLToPath(source) : source;
  }

  /** Sample `index` into out[at, at + sampleFloats); returns its label (or target). */
  read(index: number, out: Float32Array, at: number): number {
    const view = out.subarray(at, at + this.sampleFloats);
    if (view.length !== this.sampleFloats)
      throw new Error(`internal: no room for a sample of ${this.sampleFloats} floats at ${at} of ${out.length}`);
    const bits = new Uint32Array(view.buffer, view.byteOffset, view.length);
    bits.fill(UNWRITTEN);
    const given = this.watchNext ? watchedView(view, index, this.source) : view;
    this.watchNext = false;
    let label: number;
    try {
      label = this.ds.read(index, given, 0);
    } catch (err) {
      if (err instanceof TandemError) throw err;
      throw new TandemError(
        'BAD_DATA',
        `dataset ${this.source}: read(${index}, out, 0) threw ` +
          `${err instanceof Error ? `${err.name}: ${err.message}` : String(err)} ` +
          `(out is a view of exactly one sample: ${this.sampleFloats} floats from offset 0)`,
        undefined,
        { cause: err },
      );
    }
    // A read that returns no label at all (a stub, `read() {}`) is named for that by the caller's label check first.
    if (typeof label === 'number') this.checkValues(index, view, bits);
    return label;
  }

  /** Every element written, and finite. */
  private checkValues(index: number, view: Float32Array, bits: Uint32Array): void {
    for (let k = 0; k < view.length; k++) {
      if (Number.isFinite(view[k])) continue;
      if (bits[k] === UNWRITTEN) {
        let last = k;
        while (last + 1 < view.length && bits[last + 1] === UNWRITTEN) last++;
        throw new TandemError(
          'BAD_DATA',
          `dataset ${this.source}: read(${index}, out, 0) left out[${k === last ? k : `${k}..${last}`}] unwritten: ` +
            (`a sample is ${view.length} values (sampleShape [${this.ds.sampleShape.join(', ')}]) and read must ` +
              `write every one, zeros included (out is not cleared beforehand); `) +
            ("a sample of fewer values would train on whatever the buffer held (make every sample sampleShape's " +
              'size, or pad it)'),
        );
      }
      throw new TandemError(
        'BAD_DATA',
        `dataset ${this.source}: sample ${index} has a non-finite input value at element ${k} (${view[k]}); ` +
          'clean or impute it in the data module (a NaN input makes the loss and the weights NaN)',
      );
    }
  }
}

/** A quiet NaN with a payload no arithmetic produces (JavaScript's NaN is 0x7fc00000): "not written by read". */
const UNWRITTEN = 0x7fc0_7a4d;

/** `view`, behind a proxy that throws on a write to an element it does not have. */
function watchedView(view: Float32Array, index: number, source: string): Float32Array {
  return new Proxy(view, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
    set(target, key, value) {
      if (outsideElement(key, target.length)) {
        throw new TandemError(
          'BAD_DATA',
          `dataset ${source}: read(${index}, out, 0) wrote out[${String(key)}], past its sample: out holds exactly ` +
            `one sample ` +
            `(${target.length} floats from offset 0), and a write past it would overwrite another sample`,
        );
      }
      return Reflect.set(target, key, value, target);
    },
  });
}

/** A numeric key (as typed arrays read keys) that is not an element of an array of `length`. */
function outsideElement(key: string | symbol, length: number): boolean {
  if (typeof key !== 'string') return false;
  const n = Number(key);
  if (key !== String(n) && key !== '-0') return false; // a named property, not an element
  return !(Number.isInteger(n) && n >= 0 && n < length && key !== '-0');
}
