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

/** What a store accepts of one connection's requests; a request past one ends that connection (FrameRefused). */
export interface StoreLimits {
  maxKeyBytes: number;
  maxValueBytes: number;
  /** Keys the store holds at most (a SET of a new key past it is refused). */
  maxKeys: number;
}

export const STORE_LIMITS: StoreLimits = { maxKeyBytes: 1024, maxValueBytes: 1 << 30, maxKeys: 1 << 22 };
/** Longest header line of a request or reply. */
export const MAX_HEADER_BYTES = 256;
/** Longest wait a request may ask for (setTimeout's bound). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A frame the store refuses: the message names the bound or what was malformed (the peer is named by the caller). */
export class FrameRefused extends Error {}

export interface RequestHeader {
  command: StoreCommand;
  timeoutMs: number;
  keyBytes: number;
  valueBytes: number;
  /** Header line, newline included. */
  headerBytes: number;
}

/** A request's header line (without its newline), checked against `limits`; FrameRefused otherwise. */
export function parseRequestHeader(line: Buffer, limits: StoreLimits = STORE_LIMITS): RequestHeader {
  const text = line.toString('latin1');
  const [command, timeout, keyBytes, valueBytes, extra] = text.split(' ');
  const sizes = [timeout, keyBytes, valueBytes].map(n => (/^\d{1,16}$/.test(n ?? '') ? Number(n) : NaN));
  if (!(STORE_COMMANDS as readonly string[]).includes(command) || extra !== undefined || sizes.some(n => !(n >= 0)))
    throw new FrameRefused(`malformed store request ${JSON.stringify(text.slice(0, 80))}`);
  const [timeoutMs, k, v] = sizes;
  if (k > limits.maxKeyBytes) throw new FrameRefused(`a key of ${k} bytes, over the bound of ${limits.maxKeyBytes}`);
  if (v > limits.maxValueBytes)
    throw new FrameRefused(`a value of ${v} bytes, over the bound of ${limits.maxValueBytes}`);
  if (command !== 'SET' && command !== 'ADD' && v > 0) throw new FrameRefused(`a ${command} with a value`);
  if (command === 'ADD' && v > 20) throw new FrameRefused(`an ADD of ${v} bytes (a decimal integer has at most 20)`);
  return {
    command: command as StoreCommand,
    timeoutMs: Math.min(timeoutMs, MAX_TIMEOUT_MS),
    keyBytes: k,
    valueBytes: v,
    headerBytes: line.length + 1,
  };
}

/** A reply's header line (without its newline): its status and body length; FrameRefused when malformed. */
export function parseReplyHeader(line: Buffer, maxBodyBytes: number): { ok: boolean; bodyBytes: number } {
  const [status, bytes, extra] = line.toString('latin1').split(' ');
  const n = /^\d{1,16}$/.test(bytes ?? '') ? Number(bytes) : NaN;
  if ((status !== 'OK' && status !== 'ERR') || extra !== undefined || !(n >= 0))
    throw new FrameRefused(`malformed store reply ${JSON.stringify(line.toString('latin1').slice(0, 80))}`);
  if (n > maxBodyBytes) throw new FrameRefused(`a reply of ${n} bytes, over the bound of ${maxBodyBytes}`);
  return { ok: status === 'OK', bodyBytes: n };
}
