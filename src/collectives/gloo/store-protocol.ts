/**
 * The wire format of tandem's rendezvous store (a c10d TCPStore-like key/value
 * store that Gloo's rendezvous and a launcher use), shared by the server
 * (tcp-store-server.ts), the TypeScript client (tcp-store-client.ts) and the
 * addon's C++ client (native/src/gloo-tcp-store.cc). Binary-safe:
 *
 *   request: "<SET|GET|WAIT|ADD> <timeoutMs> <keyBytes> <valueBytes>\n" key value
 *   reply:   "OK <valueBytes>\n" value  |  "ERR <messageBytes>\n" message
 *
 * GET and WAIT are answered when the key is set, or with ERR after timeoutMs
 * naming the key. ADD's value is a decimal delta; its reply the new value
 * (a missing key counts as 0).
 */
export const STORE_COMMANDS = ['SET', 'GET', 'WAIT', 'ADD'] as const;
export type StoreCommand = (typeof STORE_COMMANDS)[number];

export interface StoreRequest {
  command: StoreCommand;
  timeoutMs: number;
  key: string;
  value: Buffer;
}
export type StoreReply = { ok: true; value: Buffer } | { ok: false; message: string };

const NEWLINE = 10;

export function encodeRequest({ command, timeoutMs, key, value }: StoreRequest): Buffer {
  const k = Buffer.from(key, 'utf8');
  return Buffer.concat([
    Buffer.from(`${command} ${Math.max(0, Math.round(timeoutMs))} ${k.length} ${value.length}\n`),
    k,
    value,
  ]);
}

export function encodeReply(reply: StoreReply): Buffer {
  const body = reply.ok ? reply.value : Buffer.from(reply.message, 'utf8');
  return Buffer.concat([Buffer.from(`${reply.ok ? 'OK' : 'ERR'} ${body.length}\n`), body]);
}

/** A framed message parsed from the front of `buf`, with the bytes it used; undefined until it is complete. */
export type Parsed<T> = { message: T; used: number } | undefined;

/** Throws a RangeError on a malformed header (the connection is then closed). */
export function parseRequest(buf: Buffer): Parsed<StoreRequest> {
  const nl = buf.indexOf(NEWLINE);
  if (nl < 0) {
    if (buf.length > 256) throw new RangeError('store request header too long');
    return undefined;
  }
  const [command, timeout, keyBytes, valueBytes, extra] = buf.subarray(0, nl).toString('latin1').split(' ');
  const sizes = [timeout, keyBytes, valueBytes].map(Number);
  if (
    !(STORE_COMMANDS as readonly string[]).includes(command) ||
    extra !== undefined ||
    sizes.some(n => !Number.isSafeInteger(n) || n < 0)
  ) {
    throw new RangeError(`malformed store request '${buf.subarray(0, Math.min(nl, 80)).toString('latin1')}'`);
  }
  const [timeoutMs, k, v] = sizes;
  const used = nl + 1 + k + v;
  if (buf.length < used) return undefined;
  const key = buf.subarray(nl + 1, nl + 1 + k).toString('utf8');
  return {
    message: { command: command as StoreCommand, timeoutMs, key, value: Buffer.from(buf.subarray(nl + 1 + k, used)) },
    used,
  };
}

export function parseReply(buf: Buffer): Parsed<StoreReply> {
  const nl = buf.indexOf(NEWLINE);
  if (nl < 0) return undefined;
  const [status, bytes] = buf.subarray(0, nl).toString('latin1').split(' ');
  const n = Number(bytes);
  if ((status !== 'OK' && status !== 'ERR') || !Number.isSafeInteger(n) || n < 0)
    throw new RangeError(`malformed store reply '${status}'`);
  const used = nl + 1 + n;
  if (buf.length < used) return undefined;
  const body = Buffer.from(buf.subarray(nl + 1, used));
  return { message: status === 'OK' ? { ok: true, value: body } : { ok: false, message: body.toString('utf8') }, used };
}
