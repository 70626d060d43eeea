/**
 * The dashboard's HTTP server (node:http): the page, its script and style, uPlot's files, and `/events`, the feed's
 * messages as server-sent events. It binds 127.0.0.1 by default and then answers only requests addressed to the
 * loopback name (a DNS-rebinding page cannot read it). Bound to any other address, every request — page, events,
 * assets — must carry `?token=T`, a random token that is in the URL the `dashboard` event gives, once. Only the fixed
 * list of files below is served: no path reaches the file system.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import os from 'node:os';
import { TandemError } from '../errors.js';
import { DASHBOARD_ASSETS, type DashboardAsset } from './dashboard-assets.js';
import type { DashboardFeed, DashboardMessage } from './dashboard-feed.js';

export interface DashboardServer {
  /** The page's address, with the token when there is one. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

export interface ServeOptions {
  /** 0: any free port. */
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** The flags that set port and host, for a listen error's fix: default `--dashboard`, `--dashboard-host`. */
  flags?: { port: string; host: string };
}

/** Event streams open at once: past this many a page is refused (503) until one closes. */
export const MAX_STREAMS = 64;

/**
 * A page's stream that has this much not yet taken by its client (a client that does not read, or reads slower than
 * the run publishes) is closed: the run's memory does not grow with it. A page that reconnects gets everything again.
 */
export const MAX_UNSENT_BYTES = 16 * 1024 * 1024;

export async function serveDashboard(feed: DashboardFeed, options: ServeOptions): Promise<DashboardServer> {
  const host = options.host ?? '127.0.0.1';
  const token = LOOPBACK.has(host) ? undefined : randomBytes(18).toString('base64url');
  /** Open event streams, each with the flush of what it has not sent yet. */
  const open = new Map<ServerResponse, () => void>();
  let port = 0;
  const server = createServer((req, res) => {
    const url = parsedUrl(req);
    if (!url) return answer(res, 400, 'bad request target');
    const refusal = refused(req, url, token, port);
    if (refusal) return answer(res, refusal.status, refusal.text);
    const route = url.pathname;
    if (route === '/events') {
      // A HEAD has no body to stream: answered at once, it holds no page's place
      if (req.method === 'HEAD') return void res.writeHead(200, EVENT_STREAM_HEADERS).end();
      if (open.size >= MAX_STREAMS) return answer(res, 503, `${MAX_STREAMS} pages are open already: close one`);
      return streamEvents(feed, res, open);
    }
    const asset = Object.hasOwn(DASHBOARD_ASSETS, route) ? DASHBOARD_ASSETS[route] : undefined;
    if (!asset) return answer(res, 404, 'not found');
    void sendAsset(res, asset, token);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', err => reject(listenError(err, host, options)));
    server.listen(options.port, host, () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  const shown = host === '0.0.0.0' || host === '::' ? os.hostname() : host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}/${token ? `?token=${token}` : ''}`,
    port,
    close: async () => {
      for (const [res, flush] of open) {
        flush();
        res.end();
      }
      open.clear();
      await new Promise<void>(resolve => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** Why the dashboard cannot listen, and the flag that fixes it. */
function listenError(err: NodeJS.ErrnoException, host: string, options: ServeOptions): TandemError {
  const flags = options.flags ?? { port: '--dashboard', host: '--dashboard-host' };
  const fix =
    err.code === 'EADDRINUSE' || err.code === 'EACCES'
      ? `another process holds port ${options.port}, or it needs privileges: give another ${flags.port} PORT, or ` +
        `${flags.port === '--dashboard' ? 'the flag alone' : `${flags.port} 0`} for a free one`
      : `give ${flags.host} an address of this machine (127.0.0.1, 0.0.0.0)`;
  return new TandemError(
    'BAD_CONFIG',
    `the dashboard cannot listen on ${host}:${options.port}: ${err.message} (${fix})`,
  );
}

/** The request's target as a URL; undefined when it is not one (a stranger's malformed request, answered 400). */
function parsedUrl(req: IncomingMessage): URL | undefined {
  try {
    return new URL(req.url ?? '/', 'http://dashboard');
  } catch {
    return undefined;
  }
}

/** Why a request is refused (a bad method, a foreign Host header on loopback, a missing or wrong token), or none. */
function refused(
  req: IncomingMessage,
  url: URL,
  token: string | undefined,
  port: number,
): { status: number; text: string } | undefined {
  if (req.method !== 'GET' && req.method !== 'HEAD') return { status: 405, text: 'only GET' };
  if (token === undefined) {
    const name = (req.headers.host ?? '').replace(/:\d+$/, '');
    const given = (req.headers.host ?? '').slice(name.length + 1);
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(name) || given !== String(port))
      return { status: 403, text: 'the dashboard answers only at its loopback address' };
    return undefined;
  }
  const sent = url.searchParams.get('token') ?? '';
  const a = Buffer.from(sent),
    b = Buffer.from(token);
  if (a.length !== b.length || !timingSafeEqual(a, b))
    return { status: 403, text: "the dashboard's token is missing or wrong: open the URL the run printed" };
  return undefined;
}

function answer(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`${text}\n`);
}

async function sendAsset(res: ServerResponse, asset: DashboardAsset, token: string | undefined): Promise<void> {
  let body: string | undefined;
  try {
    body = await asset.body(token);
  } catch {
    body = undefined;
  }
  if (body === undefined) return answer(res, 404, `${asset.missing ?? 'not found'}`);
  res.writeHead(200, {
    'content-type': asset.type,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'content-security-policy':
      "default-src 'self'; img-src 'self' blob: data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  });
  res.end(body);
}

/**
 * Messages reach a page at most every SEND_MS, several in one write: a write per step would cost the main thread a
 * system call per step (measured: about 1 ms a step on alexnet-mini), and a page redraws no faster than that anyway.
 */
const SEND_MS = 250;

/** Each message's frame, made once however many pages get it (a late page's snapshot reuses the frames too). */
const frames = new WeakMap<DashboardMessage, string>();

function frameOf(m: DashboardMessage): string {
  let frame = frames.get(m);
  if (frame === undefined) {
    frame = m.kind === 'end' ? 'event: end\ndata: {}\n\n' : `data: ${JSON.stringify(m)}\n\n`;
    frames.set(m, frame);
  }
  return frame;
}

const EVENT_STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  connection: 'keep-alive',
};

function streamEvents(feed: DashboardFeed, res: ServerResponse, open: Map<ServerResponse, () => void>): void {
  res.writeHead(200, EVENT_STREAM_HEADERS);
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  /** What the client may leave unread: the snapshot it was sent first, and MAX_UNSENT_BYTES more. */
  let allowed = MAX_UNSENT_BYTES;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (res.writableLength > allowed)
      res.destroy(); // a client far behind: dropped ('close' unsubscribes it)
    else if (pending && !res.writableEnded) res.write(pending);
    pending = '';
  };
  const send = (m: DashboardMessage) => {
    if (res.destroyed) return;
    pending += frameOf(m);
    if (m.kind === 'end') {
      flush();
      res.end();
    } else timer ??= setTimeout(flush, SEND_MS).unref();
  };
  pending = 'retry: 2000\n\n';
  for (const m of feed.snapshot()) send(m);
  if (feed.done) return;
  flush();
  allowed += res.writableLength;
  open.set(res, flush);
  const unsubscribe = feed.subscribe(send);
  res.on('close', () => {
    clearTimeout(timer);
    unsubscribe();
    open.delete(res);
  });
}
