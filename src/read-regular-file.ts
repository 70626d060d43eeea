/**
 * Reading a file that came from elsewhere (a model.json, a checkpoint): only a regular file, and only up to a bound. A
 * name that leads to a device (`checkpoint-000000009.tandem -> /dev/zero`) would otherwise be read until memory runs
 * out, and a FIFO would block the read (and its libuv thread) forever: both are refused by what they are, before a
 * byte is read. Opened with O_NONBLOCK so that opening a FIFO with no writer returns at once (the flag changes nothing
 * for a regular file).
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';

/** Why a file was not read: what it is, or its size over the bound (the caller names the file and the fix). */
export class NotReadable extends Error {}

const FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

function check(st: Stats, maxBytes: number): void {
  if (!st.isFile())
    throw new NotReadable(
      `it is not a regular file (${st.isDirectory() ? 'a directory' : 'a device, FIFO or socket'})`,
    );
  if (st.size > maxBytes) throw new NotReadable(`it has ${st.size} bytes, over the bound of ${maxBytes}`);
}

/**
 * `file`'s bytes: a regular file of at most `maxBytes` (NotReadable otherwise; the file system's own errors as they
 * are). A file that grows while it is read is read to the size it had.
 */
export async function readRegularFile(file: string, maxBytes: number): Promise<Buffer> {
  const handle = await open(file, FLAGS);
  try {
    const st = await handle.stat();
    check(st, maxBytes);
    const buf = Buffer.allocUnsafe(st.size);
    let at = 0;
    for (let n = 1; n > 0 && at < buf.length; at += n) ({ bytesRead: n } = await handle.read(buf, at, buf.length - at));
    return buf.subarray(0, at);
  } finally {
    await handle.close();
  }
}

/** readRegularFile, synchronously. */
export function readRegularFileSync(file: string, maxBytes: number): Buffer {
  const fd = openSync(file, FLAGS);
  try {
    const st = fstatSync(fd);
    check(st, maxBytes);
    const buf = Buffer.allocUnsafe(st.size);
    let at = 0;
    for (let n = 1; n > 0 && at < buf.length; at += n) n = readSync(fd, buf, at, buf.length - at, null);
    return buf.subarray(0, at);
  } finally {
    closeSync(fd);
  }
}

/** The longest text file read (V8's strings end near 512 MiB). */
export const MAX_TEXT_FILE_BYTES = 2 ** 29;

/** A regular file of at most MAX_TEXT_FILE_BYTES as UTF-8 text (a run's summary, event log or trace). */
export function readTextFileSync(file: string): string {
  return readRegularFileSync(file, MAX_TEXT_FILE_BYTES).toString('utf8');
}
