/**
 * What the hosts of a run agree on outside the Gloo communicators, over host
 * 0's rendezvous store (one connection per host, on the main thread):
 * - the checkpoint to resume from: host 0 reads it and publishes its bytes,
 *   every other host takes them from the store (no shared filesystem);
 * - whether to stop: each host adds its wish after step s to one counter per
 *   step; the last to arrive publishes the verdict, read after step s+1, so
 *   every host stops after the same step (s+1), or none does. Reading it a
 *   step later never waits on a host that is gone: step s+1's all-reduce, which
 *   needs every host, fails first with PEER_LOST naming it;
 * - the replica check: each host publishes its devices' parameter digests
 *   after step s and reads every host's once step s+1 is applied (so, as for
 *   the stop, they are all there: the read never waits on a host);
 * - where host 0's monitor hub listens (world/monitor-hub.ts).
 */
import { TandemError } from '../errors.js';
import { StoreClient } from '../collectives/gloo/tcp-store-client.js';
import type { Topology } from './topology.js';
import type { CheckpointBytes } from '../checkpoint/checkpoint-file.js';

/** A stop wish weighs this much in a step's counter; an arrival weighs 1 (hosts < this). */
const STOP_WEIGHT = 1 << 16;
const RESUME_KEY = 'tandem.resume';
const MONITOR_KEY = 'tandem.monitor.port';
/** The first byte of the resume key's value: the checkpoint's bytes follow, or host 0's error message. */
const RESUME_OK = 1;
const RESUME_FAILED = 0;

export class HostChannel {
  private constructor(private readonly client: StoreClient, private readonly topology: Topology) {}

  static async open(storeUrl: string, topology: Topology, timeoutMs: number): Promise<HostChannel> {
    return new HostChannel(await StoreClient.connect(storeUrl, timeoutMs), topology);
  }

  /** Host 0 runs `read` and publishes what it read (or its failure); every host resolves with the same bytes. */
  async shareCheckpoint(read: () => Promise<CheckpointBytes>): Promise<CheckpointBytes> {
    if (this.topology.process === 0) return this.publishCheckpoint(read);
    const { kind, header, body } = unframe(await this.client.get(RESUME_KEY));
    if (kind !== RESUME_OK) throw new TandemError('BAD_CHECKPOINT', `host 0 could not read the checkpoint to resume from: ${header.message}`);
    return { source: `${header.source} (host 0's, sent over the rendezvous store)`, bytes: body };
  }

  private async publishCheckpoint(read: () => Promise<CheckpointBytes>): Promise<CheckpointBytes> {
    try {
      const ckpt = await read();
      await this.client.set(RESUME_KEY, frame(RESUME_OK, { source: ckpt.source }, ckpt.bytes));
      return ckpt;
    } catch (err) {
      await this.client.set(RESUME_KEY, frame(RESUME_FAILED, { message: (err as Error).message }, new Uint8Array(0))).catch(() => {});
      throw err;
    }
  }

  /**
   * This host's wish to stop, after `step`, before it starts step+1. The last host to add its wish publishes the
   * verdict; step+1's all-reduce needs every host, so once step+1 is done here every wish is in (stopAgreed).
   */
  async submitStop(step: number, wanted: boolean): Promise<void> {
    const key = `tandem.stop.${step}`;
    const count = await this.client.add(key, 1 + (wanted ? STOP_WEIGHT : 0));
    if (count % STOP_WEIGHT === this.topology.processes) await this.client.set(`${key}.agreed`, count >= STOP_WEIGHT ? '1' : '0');
  }

  /** Whether any host wished to stop after `step` (call it once step+1 is done): the same answer on every host. */
  async stopAgreed(step: number): Promise<boolean> {
    return (await this.client.get(`tandem.stop.${step}.agreed`)).toString() === '1';
  }

  /** This host's devices' digests of step `step`'s parameters (replica-check.ts). */
  async submitDigests(step: number, digests: string[]): Promise<void> {
    await this.client.set(`tandem.replicas.${step}.${this.topology.process}`, JSON.stringify(digests));
  }

  /** Every host's digests of `step`, by host (call it once step+1 is applied here: every host has published them). */
  async digestsOf(step: number): Promise<string[][]> {
    const hosts = Array.from({ length: this.topology.processes }, (_, h) => this.client.get(`tandem.replicas.${step}.${h}`));
    return (await Promise.all(hosts)).map(v => JSON.parse(v.toString()) as string[]);
  }

  /** Host 0: the port its monitor hub listens on. */
  async publishMonitorPort(port: number): Promise<void> {
    await this.client.set(MONITOR_KEY, String(port));
  }

  /** The port host 0's monitor hub listens on (waits for host 0 to publish it). */
  async monitorPort(): Promise<number> {
    return Number((await this.client.get(MONITOR_KEY)).toString());
  }

  close(): void { this.client.close(); }
}

/** kind byte, header length (u32 LE), JSON header, body. */
function frame(kind: number, header: object, body: Uint8Array): Buffer {
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(4);
  length.writeUInt32LE(json.length, 0);
  return Buffer.concat([Buffer.from([kind]), length, json, body]);
}

function unframe(value: Buffer): { kind: number; header: { source?: string; message?: string }; body: Uint8Array } {
  const length = value.readUInt32LE(1);
  return { kind: value[0], header: JSON.parse(value.subarray(5, 5 + length).toString()) as { source?: string; message?: string }, body: value.subarray(5 + length) };
}
