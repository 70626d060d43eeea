/**
 * The bytes a socket delivered and nobody took yet, kept as the chunks they came in: a message is copied once, when it
 * is taken whole (appending each chunk to one buffer would copy a large value once per chunk: quadratic).
 */
import { TAG_BYTES, type MessageTags } from '../../world/job-secret.js';
import { FrameRefused } from './store-protocol.js';

export class ChunkQueue {
  private chunks: Buffer[] = [];
  private bytes = 0;

  get length(): number {
    return this.bytes;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.bytes += chunk.length;
  }

  /** The offset of the first `byte` among the first `within` bytes from offset `from` on, or -1. */
  indexOf(byte: number, within: number, from = 0): number {
    let base = 0;
    for (const c of this.chunks) {
      if (base >= within) break;
      if (base + c.length > from) {
        const start = Math.max(0, from - base);
        const i = c.subarray(start, within - base).indexOf(byte);
        if (i >= 0) return base + start + i;
      }
      base += c.length;
    }
    return -1;
  }

  /** The first `n` bytes (n ≤ length), removed. */
  take(n: number): Buffer {
    if (n > this.bytes) throw new RangeError(`take(${n}) of ${this.bytes} bytes`);
    const first = this.chunks[0];
    let out: Buffer;
    if (first && first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let at = 0;
      while (at < n) {
        const c = this.chunks[0];
        const k = Math.min(c.length, n - at);
        c.copy(out, at, 0, k);
        at += k;
        if (k === c.length) this.chunks.shift();
        else this.chunks[0] = c.subarray(k);
      }
    }
    this.bytes -= n;
    return out;
  }

  /** The first `n` bytes (n ≤ length) as a copy, left in place. */
  peek(n: number): Buffer {
    const first = this.chunks[0];
    if (first && first.length >= n) return first.subarray(0, n);
    return Buffer.concat(this.chunks, Math.min(n, this.bytes)).subarray(0, n);
  }
}

/** One framed message: its parsed header and its body (for a request, key then value). */
export interface Frame<H> {
  header: H;
  body: Buffer;
}

/**
 * The framed messages of a stream: a header line of at most `maxHeaderBytes`, a body whose length the header gives,
 * and, on an authenticated connection, the sender's tag over both (job-secret.ts). `parse` refuses a header by
 * throwing; a tag that does not match is refused too (FrameRefused), and so is a header line too long.
 */
export class FrameReader<H extends { bodyBytes: number }> {
  private readonly queue = new ChunkQueue();
  private header?: { parsed: H; line: Buffer };

  constructor(
    private readonly parse: (line: Buffer) => H,
    private readonly maxHeaderBytes: number,
    private readonly tags?: MessageTags,
  ) {}

  push(chunk: Buffer): void {
    this.queue.push(chunk);
  }

  /** The next whole message, or undefined until it has arrived. */
  next(): Frame<H> | undefined {
    if (!this.header) {
      const nl = this.queue.indexOf(10, this.maxHeaderBytes + 1);
      if (nl < 0) {
        if (this.queue.length > this.maxHeaderBytes)
          throw new FrameRefused(`a header line over ${this.maxHeaderBytes} bytes`);
        return undefined;
      }
      const line = this.queue.take(nl + 1);
      this.header = { parsed: this.parse(line.subarray(0, nl)), line };
    }
    const { parsed, line } = this.header;
    const tagBytes = this.tags ? TAG_BYTES : 0;
    if (this.queue.length < parsed.bodyBytes + tagBytes) return undefined;
    this.header = undefined;
    const body = this.queue.take(parsed.bodyBytes);
    if (this.tags) {
      const tag = this.queue.take(TAG_BYTES);
      if (!this.tags.open(tag, line, body))
        throw new FrameRefused('a message whose tag does not match (changed, replayed or not from a job host)');
    }
    return { header: parsed, body };
  }
}
