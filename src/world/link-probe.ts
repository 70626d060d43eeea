/**
 * The host link, measured at start (`--strategy auto` across hosts): every
 * host at once times all-reduces over the real transport between hosts (Gloo,
 * one rank per host, at the rendezvous store) — a tiny one for the latency,
 * then ×4 sizes from 16 KB up to 16 MB, stopping once one takes longer than
 * PROBE_STOP_MS — and fits t = α + β·wire bytes (link-fit.ts), and the same
 * form to the process CPU each all-reduce cost (the cost model's CPU ceiling).
 * Every host gets the same samples (the times and CPU are agreed over the
 * link), so the same fit.
 */
import { runOneShotWorker } from '../actors/one-shot-worker.js';
import { fitLink, type LinkCost } from '../profiling/link-fit.js';
import type { ResolvedConfig } from '../config-types.js';
import type { LinkProbeReply, LinkProbeRequest } from './link-probe-worker.js';
import { storeUrl } from './rendezvous.js';

/** Floats per probed all-reduce: 4 B (latency), then 16 KB .. 16 MB. */
export const PROBE_FLOATS = [1, 4096, 16384, 65536, 262144, 1 << 20, 1 << 22];
const PROBE_REPEATS = 3;
/** Stop growing once an all-reduce takes this long (a slow link: enough bytes to see its rate). */
const PROBE_STOP_MS = 50;

/** All hosts call this together (host 0 serving the store); `address`: this host's address towards host 0. */
export async function probeHostLink(cfg: ResolvedConfig, address: string): Promise<LinkCost> {
  const request: LinkProbeRequest = {
    rank: cfg.topology.process,
    size: cfg.topology.processes,
    store: storeUrl(cfg.rendezvous!),
    prefix: 'tandem.link-probe',
    hostname: address,
    timeoutMs: Math.max(cfg.stallTimeoutMs, 60_000),
    floats: PROBE_FLOATS,
    repeats: PROBE_REPEATS,
    stopMs: PROBE_STOP_MS,
  };
  const reply = await runOneShotWorker<Extract<LinkProbeReply, { type: 'samples' }>>(
    new URL('./link-probe-worker.js', import.meta.url),
    request,
    'link probe',
  );
  return fitLink(reply.samples, cfg.topology.processes);
}
