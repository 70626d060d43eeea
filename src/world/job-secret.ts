/**
 * The job's secret and what proves it (docs/guide/security.md). Every host of a job of several holds the same secret
 * (TANDEM_JOB_SECRET: `tandem launch` generates one for the hosts it starts; hosts started by hand take it from the
 * environment or `--job-secret-file`). A connection to host 0's rendezvous store or monitor hub is admitted only after
 * a challenge-response over a nonce from each side, the secret never crossing the wire:
 *
 *   client → server   "TANDEM-AUTH 1 <service> <client nonce, 64 hex>\n"
 *   server → client   "<server nonce, 64 hex> <HMAC(secret, '<service> server <cn> <sn>'), 64 hex>\n"
 *   client → server   "<HMAC(secret, '<service> client <cn> <sn>'), 64 hex>\n"
 *   server → client   "OK\n" (admitted; a refused client sees the connection close)
 *
 * Both sides prove the secret (a stranger posing as host 0 is refused too). Every later message carries a tag,
 * HMAC(key, '<c|s> <sequence>\n' + message) under the connection's key HMAC(secret, '<service> session <cn> <sn>'),
 * the sequence counting each direction's messages from 0: a message changed, dropped, replayed or moved is refused.
 * The same exchange is spoken by native/src/gloo-tcp-store.cc (the ranks' Gloo rendezvous).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SECRET_ENV = 'TANDEM_JOB_SECRET';
/** The shortest secret accepted (bytes): a guessable secret authenticates nothing. */
export const MIN_SECRET_BYTES = 16;
export const TAG_BYTES = 32;
/** Longest handshake line either side accepts. */
const MAX_LINE = 256;
const HELLO = 'TANDEM-AUTH 1';

export type AuthService = 'store' | 'hub';

/** The job's secret in this process's environment, or undefined (a single-host run, or `--insecure`). */
export function jobSecret(env: NodeJS.ProcessEnv = process.env): Buffer | undefined {
  const text = env[SECRET_ENV];
  return text === undefined || text === '' ? undefined : Buffer.from(text, 'utf8');
}

/** A fresh secret for the hosts a launcher starts (base64url, 32 random bytes). */
export function newJobSecret(): string {
  return randomBytes(32).toString('base64url');
}

const hmac = (key: Buffer, text: string) => createHmac('sha256', key).update(text).digest();

/** Equal lengths and bytes, in constant time. */
function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The tags of one connection's messages, both directions, each with its sequence. */
export class MessageTags {
  private sent = 0n;
  private received = 0n;

  constructor(
    private readonly key: Buffer,
    private readonly mine: 'c' | 's',
  ) {}

  /** The tag to send after the message made of `parts`. */
  seal(...parts: (Buffer | string)[]): Buffer {
    return this.tag(this.mine, this.sent++, parts);
  }

  /** Whether `tag` is the peer's next message's tag for `parts` (the sequence moves on only when it is). */
  open(tag: Buffer, ...parts: (Buffer | string)[]): boolean {
    const ok = sameBytes(this.tag(this.mine === 'c' ? 's' : 'c', this.received, parts), tag);
    if (ok) this.received++;
    return ok;
  }

  private tag(direction: 'c' | 's', seq: bigint, parts: (Buffer | string)[]): Buffer {
    const h = createHmac('sha256', this.key).update(`${direction} ${seq}\n`);
    for (const p of parts) h.update(p);
    return h.digest();
  }
}

/** What a handshake leaves: the connection's tags, and the bytes that came after it. */
export interface Admitted {
  tags: MessageTags;
  rest: Buffer;
}

/** A handshake that failed: what the peer did wrong (for host 0's log). */
export class AuthRefused extends Error {}

/** Reads newline-ended lines off a socket (at most MAX_LINE bytes each) until the handshake is over. */
class LineReader {
  private buf: Buffer = Buffer.alloc(0);
  private waiting?: { resolve: (line: string) => void; reject: (err: Error) => void };
  private failed?: Error;

  constructor(private readonly socket: import('node:net').Socket) {
    socket.on('data', this.onData);
    socket.once('close', this.onClose);
  }

  next(): Promise<string> {
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.deliver();
    });
  }

  /** Stops reading; the socket is paused, and the bytes after the last line are returned. */
  detach(): Buffer {
    this.socket.pause();
    this.socket.off('data', this.onData);
    this.socket.off('close', this.onClose);
    return this.buf;
  }

  private readonly onData = (chunk: Buffer) => {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    this.deliver();
  };

  private readonly onClose = () => {
    this.failed ??= new AuthRefused('closed the connection during the handshake');
    this.deliver();
  };

  private deliver(): void {
    const w = this.waiting;
    if (!w) return;
    const nl = this.buf.indexOf(10);
    if (nl < 0 || nl > MAX_LINE) {
      if (this.buf.length > MAX_LINE || nl > MAX_LINE)
        this.failed = new AuthRefused(`sent a handshake line over ${MAX_LINE} bytes (not a tandem host)`);
      if (!this.failed) return;
      this.waiting = undefined;
      w.reject(this.failed);
      return;
    }
    const line = this.buf.subarray(0, nl).toString('latin1');
    this.buf = this.buf.subarray(nl + 1);
    this.waiting = undefined;
    w.resolve(line);
  }
}

const HEX64 = /^[0-9a-f]{64}$/;

/** Runs `steps` with a reader, within `timeoutMs`; the socket is paused on return (resume it after attaching). */
async function handshake(
  socket: import('node:net').Socket,
  timeoutMs: number,
  steps: (reader: LineReader) => Promise<MessageTags>,
): Promise<Admitted> {
  const reader = new LineReader(socket);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AuthRefused(`did not finish the handshake within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const tags = await Promise.race([steps(reader), late]);
    return { tags, rest: reader.detach() };
  } catch (err) {
    reader.detach();
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** Host 0's side: admits a client that proves the secret (AuthRefused naming what it got wrong otherwise). */
export function admitClient(
  socket: import('node:net').Socket,
  secret: Buffer,
  service: AuthService,
  timeoutMs: number,
): Promise<Admitted> {
  return handshake(socket, timeoutMs, async reader => {
    const hello = (await reader.next()).split(' ');
    const cn = hello[3];
    if (hello.slice(0, 3).join(' ') !== `${HELLO} ${service}` || hello.length !== 4 || !HEX64.test(cn))
      throw new AuthRefused(`did not open with tandem's ${service} handshake (no job secret, or not a tandem host)`);
    const sn = randomBytes(32).toString('hex');
    socket.write(`${sn} ${hmac(secret, `${service} server ${cn} ${sn}`).toString('hex')}\n`);
    const proof = await reader.next();
    const expected = hmac(secret, `${service} client ${cn} ${sn}`);
    if (!HEX64.test(proof) || !sameBytes(Buffer.from(proof, 'hex'), expected))
      throw new AuthRefused('failed the challenge: its job secret is not this job');
    socket.write('OK\n');
    return new MessageTags(hmac(secret, `${service} session ${cn} ${sn}`), 's');
  });
}

/** A host's side: proves the secret to host 0 and checks host 0 holds it too. */
export function proveSecret(
  socket: import('node:net').Socket,
  secret: Buffer,
  service: AuthService,
  timeoutMs: number,
): Promise<Admitted> {
  return handshake(socket, timeoutMs, async reader => {
    const cn = randomBytes(32).toString('hex');
    socket.write(`${HELLO} ${service} ${cn}\n`);
    const [sn, proof, extra] = (await reader.next().catch(refusedBy(service))).split(' ');
    if (extra !== undefined || !HEX64.test(sn ?? '') || !HEX64.test(proof ?? ''))
      throw new AuthRefused(`the ${service} did not answer tandem's handshake (an old tandem, or not tandem)`);
    if (!sameBytes(Buffer.from(proof, 'hex'), hmac(secret, `${service} server ${cn} ${sn}`)))
      throw new AuthRefused(`the ${service} does not hold this job's secret (another job's host 0, or an impostor)`);
    socket.write(`${hmac(secret, `${service} client ${cn} ${sn}`).toString('hex')}\n`);
    if ((await reader.next().catch(refusedBy(service))) !== 'OK')
      throw new AuthRefused(`the ${service} refused this host`);
    return new MessageTags(hmac(secret, `${service} session ${cn} ${sn}`), 'c');
  });
}

const refusedBy = (service: AuthService) => (err: unknown) => {
  throw err instanceof AuthRefused
    ? new AuthRefused(
        `the ${service} closed the connection during the handshake: host 0 refused this host's job secret (every ` +
          `host needs the same ${SECRET_ENV} or --job-secret-file), or host 0 runs without one (--insecure)`,
      )
    : err;
};
