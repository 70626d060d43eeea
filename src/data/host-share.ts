/**
 * `hostShare(samples, { batch, hostRank, hosts })`, for a data module's factory on several hosts (TF's
 * `dataset.shard`, in tandem's order): of each global batch of `samples` (one sample an element, in the run's order;
 * `batch` of them, or fewer at the end), the part host `hostRank` of `hosts` trains — samples `⌊r·s/n⌋ …
 * ⌊(r+1)·s/n⌋ - 1` of a global batch of `s` — in batches of `batch / hosts`: what tandem reads as the host's share.
 * Every host still reads every sample (the others' are disposed at once); a pipeline that can make only its share
 * (a generator over its indices) reads less.
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { shardRange } from './sampler.js';

/** The data factory's options that place a host: the global batch, this host's rank, the hosts. */
export interface HostShareOptions {
  batch?: number;
  hostRank?: number;
  hosts?: number;
}

/** This host's share of every global batch of `samples`, batched (see the file's comment). */
export function hostShare<T extends tf.TensorContainer>(
  samples: tf.data.Dataset<T>,
  options: HostShareOptions,
): tf.data.Dataset<tf.TensorContainer> {
  const { batch, hostRank, hosts } = checked(options);
  async function* share(): AsyncGenerator<T> {
    const iterator = await samples.iterator();
    for (let ended = false; !ended;) {
      const block: T[] = [];
      while (block.length < batch) {
        const next = await iterator.next();
        if (next.done) {
          ended = true;
          break;
        }
        block.push(next.value);
      }
      const [from, count] = shardRange(block.length, hosts, hostRank);
      tf.dispose(block.filter((_, i) => i < from || i >= from + count) as tf.TensorContainer[]);
      yield* block.slice(from, from + count);
    }
  }
  // tf.data.generator awaits each next(): an async generator serves
  return tf.data.generator(share as unknown as () => Iterator<T>).batch(batch / hosts);
}

function checked({ batch, hostRank = 0, hosts = 1 }: HostShareOptions): Required<HostShareOptions> {
  const fix = 'pass the data factory its options: export default (options) => hostShare(samples, options)';
  if (batch === undefined || !Number.isInteger(batch) || batch < 1)
    throw new TandemError('BAD_CONFIG', `hostShare: batch ${String(batch)} is not a positive integer; ${fix}`);
  if (!Number.isInteger(hosts) || hosts < 1 || !Number.isInteger(hostRank) || hostRank < 0 || hostRank >= hosts)
    throw new TandemError('BAD_CONFIG', `hostShare: host rank ${hostRank} of ${hosts} hosts is no host; ${fix}`);
  if (batch % hosts !== 0)
    throw new TandemError(
      'BAD_CONFIG',
      `hostShare: --batch ${batch} is not a multiple of the ${hosts} hosts, so the hosts' shares of a global batch ` +
        `differ in size; give a --batch that ${hosts} divides`,
    );
  return { batch, hostRank, hosts };
}
