/**
 * Reads of tensors on an engine without synchronous reads (webgpu: only
 * `await data()` works): each read is started the moment the tensor exists,
 * and its handler runs as soon as it and every earlier read have arrived, in
 * the order they were queued. A backward pass on such an engine queues each
 * gradient as the walk reaches it; the device's queue then executes the
 * kernels while the handlers hand each gradient over the moment its read
 * returns, before the later gradients are computed.
 *
 * @example
 * const reads = new OrderedReads(tf);
 * reads.queue(loss, v => { lossValue = v[0]; });
 * reads.queue(gradient, v => grads.set(v, offset)); // gradient may be disposed right after
 * await reads.done();
 */
import type { Tensor, Tf } from './tfjs-types.js';

export class OrderedReads {
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly tf: Tf) {}

  /**
   * Starts reading `tensor` (kept alive until read; the caller may dispose its own handle at once) and queues `then`.
   */
  queue(tensor: Tensor, then: (values: Float32Array) => void): void {
    const held = this.tf.keep(tensor.clone());
    const read = (held.data() as Promise<Float32Array>).finally(() => held.dispose());
    read.catch(() => {
      /* reported through the chain */
    });
    this.chain = this.chain.then(() => read).then(then);
  }

  /** Resolves when every queued handler has run; rejects with the first failure (a read's or a handler's). */
  done(): Promise<void> {
    return this.chain;
  }
}

/** A tensor's values, read asynchronously into a fresh plain array (the engine's own buffer never escapes). */
export async function readValues(tensor: Tensor): Promise<Float32Array> {
  return Float32Array.from((await tensor.data()) as Float32Array);
}
