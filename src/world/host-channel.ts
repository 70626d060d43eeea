/**
 * What the hosts of a run agree on outside the Gloo communicators, over host
 * 0's rendezvous store (one connection per host, on the main thread):
 * - the checkpoint to resume from: host 0 reads it and publishes its bytes,
 *   every other host takes them from the store (no shared filesystem);
 * - a checkpoint's device state (local heads of local-head and partial-fc,
 *   communication hook state): every other host publishes its devices' state
 *   of the step, host 0 collects them in global
 *   rank order and writes the one checkpoint a single process would write;
 * - the strategy `--strategy auto` picked: host 0 profiles and publishes its
 *   choice (or its failure), every other host takes it;
 * - whether to stop: each host adds its wish after step s to one counter per
 *   step before it posts step s+1; the last to arrive publishes the verdict,
 *   read once step s is applied, so every host stops after the same step
 *   (s+1), or none does. Reading it never waits on a host that is gone: a host
 *   that ran step s+1 added its wish, and step s+1's all-reduce, which needs
 *   every host, fails first with PEER_LOST naming one that did not;
 * - the replica check: each host publishes its devices' parameter digests
 *   after step s and reads every host's once step s+1 is applied (so, as for
 *   the stop, they are all there: the read never waits on a host);
 * - where host 0's monitor hub listens (world/monitor-hub.ts);
 * - that every host runs with the same flags (host-flags.ts), first;
 * - which machine each host runs on (machine-id.ts), so that hosts sharing one
 *   know they share its cores (`--strategy auto`'s CPU ceiling);
 * - meeting points before a measurement every host makes at once (`meet`:
 *   auto's calibration run, so that hosts sharing a machine measure each
 *   other's load).
 * Between steps these calls answer at once unless a host is gone or silent:
 * host 0's store closing the connection is PEER_LOST naming host 0; a stop
 * verdict missing after the peer wait (twice stallTimeoutMs, as a Gloo call)
 * is STALLED naming the hosts whose wishes are missing (each host also marks
 * its own wish, and publishes its address when it joins); no answer at all
 * from the store, STALLED naming host 0. Each names the step.
 */
import { Packr } from 'msgpackr';
import { TandemError } from '../errors.js';
import { parseStoreUrl, StoreClient } from '../collectives/gloo/tcp-store-client.js';
import { describeProcess, type Topology } from './topology.js';
import { flagDifferences, readHostFlags, type HostFlags } from './host-flags.js';
import type { CheckpointBytes, HeadState } from '../checkpoint/checkpoint-file.js';
import { frame, unframe } from './store-frame.js';

/**
 * A checkpoint's per-device state of one host's devices, local order (or, collected on host 0, of every device): local
 * heads and hook state.
 */
export interface DeviceState {
  heads?: HeadState[];
  hooks?: Float32Array[][][];
}

/** A stop wish weighs this much in a step's counter; an arrival weighs 1 (hosts < this). */
const STOP_WEIGHT = 1 << 16;
/** Host 0's wish to regroup (a host waits to join an elastic run) weighs this much (more than every stop wish). */
const REGROUP_WEIGHT = 2 ** 32;

/** What the hosts agreed after a step: go on, stop (a host wished it), or regroup to admit a host (elastic-run.ts). */
export type StepVerdict = 'go-on' | 'stop' | 'regroup';
const VERDICT_VALUES: Record<StepVerdict, string> = { 'go-on': '0', stop: '1', regroup: '2' };
const RESUME_KEY = 'tandem.resume';
const AUTO_KEY = 'tandem.auto';
/** The store key of host 0's monitor hub port (only a holder of the job secret reads it). */
export const MONITOR_KEY = 'tandem.monitor.port';
/** How much longer than the peer wait a store request may go unanswered before host 0 is taken for silent. */
const NO_ANSWER_MARGIN_MS = 1000;

const stopKey = (step: number) => `tandem.stop.${step}`;
/** Where host `host` leaves its address when it joins (a generation's prefix before it). */
export const addressKey = (host: number) => `tandem.host${host}.address`;
const machineKey = (host: number) => `tandem.host${host}.machine`;
const flagsKey = (host: number, what = 'flags') => `tandem.host${host}.${what}`;
/** The first byte of the resume key's value: the checkpoint's bytes follow, or host 0's error message. */
const RESUME_OK = 1;
const RESUME_FAILED = 0;
/** Float32Arrays travel as themselves (the checkpoint file's packing). */
const packr = new Packr({ structuredClone: true });

export class HostChannel {
  private constructor(
    private readonly client: StoreClient,
    private readonly topology: Topology,
    private readonly peerWaitMs: number,
  ) {}
  /**
   * `timeoutMs`: the store's wait for a key at setup; `peerWaitMs`: how long a host may keep the others waiting between
   * steps; `address`: this host's address, for the others' messages; `keyPrefix`: before every key (an elastic run's
   * generation).
   */
  static async open(
    storeUrl: string,
    topology: Topology,
    timeoutMs: number,
    peerWaitMs: number,
    address: string,
    keyPrefix = '',
  ): Promise<HostChannel> {
    const client = await StoreClient.connect(storeUrl, timeoutMs);
    client.keyPrefix = keyPrefix;
    await client.set(addressKey(topology.process), address);
    return new HostChannel(client, topology, peerWaitMs);
  }

  /**
   * Publishes this host's flags (host-flags.ts) and compares them: every other host with host 0's, host 0 with every
   * host's. A difference is BAD_CONFIG naming each flag and both values. `what`: 'model', the model each host built
   * (its parameters), compared the same way once built.
   */
  async agreeOnFlags(flags: HostFlags, what: 'flags' | 'model' = 'flags'): Promise<void> {
    const me = this.topology.process;
    const who = (h: number) => describeProcess(this.topology, h);
    const read = (h: number) => readHostFlags(() => this.client.get(flagsKey(h, what)), who(h), who(me));
    // Another host reads host 0's flags before it publishes its own, so that it holds them before host 0 can see a
    // difference and fail (closing the store).
    const host0 = me === 0 ? undefined : await read(0);
    await this.client.set(flagsKey(me, what), JSON.stringify(flags));
    const others = me === 0 ? Array.from({ length: this.topology.processes - 1 }, (_, h) => h + 1) : [0];
    for (const h of others) {
      const theirs = host0 ?? (await read(h));
      const differences = flagDifferences(flags, theirs, `on ${who(me)}`, `on ${who(h)}`);
      if (differences.length > 0) {
        const model = what === 'model';
        const modelPath = model ? ', and a model path must give the same model on every host' : '';
        throw new TandemError(
          'BAD_CONFIG',
          `${who(me)} and ${who(h)} ${model ? 'built different models' : 'were started with different flags'} — ` +
            `${differences.join('; ')}: every host runs the same command (only the options marked own in ` +
            `docs/reference/options.md — --host-rank, paths, outputs, … — may differ${modelPath})`,
        );
      }
    }
  }

  /** Host 0 runs `read` and publishes what it read (or its failure); every host resolves with the same bytes. */
  async shareCheckpoint(read: () => Promise<CheckpointBytes>): Promise<CheckpointBytes> {
    if (this.topology.process === 0) return this.publishCheckpoint(read);
    const { kind, header, body } = unframe(await this.client.get(RESUME_KEY));
    if (kind !== RESUME_OK)
      throw new TandemError('BAD_CHECKPOINT', `host 0 could not read the checkpoint to resume from: ${header.message}`);
    return { source: `${header.source} (host 0's, sent over the rendezvous store)`, bytes: body };
  }

  private async publishCheckpoint(read: () => Promise<CheckpointBytes>): Promise<CheckpointBytes> {
    try {
      const ckpt = await read();
      await this.client.set(RESUME_KEY, frame(RESUME_OK, { source: ckpt.source }, ckpt.bytes));
      return ckpt;
    } catch (err) {
      await this.client
        .set(RESUME_KEY, frame(RESUME_FAILED, { message: (err as Error).message }, new Uint8Array(0)))
        .catch(() => {});
      throw err;
    }
  }

  /**
   * A host other than 0, at a checkpoint of `step`: its devices' state — local heads, communication hook state (local
   * order) — goes to host 0. One payload key per host, overwritten at each checkpoint (the store keeps what it is
   * given), and a marker per step that host 0 waits on. Host 0 reads the payload before its devices start step+1,
   * whose all-reduce this host needs before it can reach its next checkpoint: the payload is never overwritten before
   * it is read.
   */
  async sendHeads(step: number, state: DeviceState): Promise<void> {
    const process = this.topology.process;
    await this.client.set(`tandem.heads.${process}`, packr.pack({ step, ...state }));
    await this.client.set(`tandem.heads.${process}.at.${step}`, '');
  }

  /**
   * Host 0, at a checkpoint of `step`: its own devices' state (`mine`) and every other host's, in global rank order.
   */
  async collectHeads(step: number, mine: DeviceState): Promise<DeviceState> {
    const heads = mine.heads && [...mine.heads],
      hooks = mine.hooks && [...mine.hooks];
    for (let p = 1; p < this.topology.processes; p++) {
      await this.client.wait([`tandem.heads.${p}.at.${step}`]);
      const sent = packr.unpack(await this.client.get(`tandem.heads.${p}`)) as { step: number } & DeviceState;
      const count = (xs?: unknown[]) => xs?.length ?? 0;
      if (sent.step !== step || count(sent.heads) !== count(mine.heads) || count(sent.hooks) !== count(mine.hooks)) {
        throw new TandemError(
          'BAD_CONFIG',
          `host ${p} sent the device state of step ${sent.step} (${count(sent.heads)} heads, ${count(sent.hooks)} ` +
            `hook states) ` +
            (`for host 0's checkpoint of step ${step} (${this.topology.localDevices} devices): every host must run ` +
              `with the same flags (--devices, --checkpoint-every, --comm-hook)`),
        );
      }
      heads?.push(...sent.heads!);
      hooks?.push(...sent.hooks!);
    }
    return { heads, hooks };
  }

  /**
   * `--strategy auto` across hosts: host 0 runs `choose` (it profiles) and publishes the choice, or its failure;
   * every host resolves with host 0's choice. The other hosts wait for it as long as host 0 profiles.
   */
  async shareChoice<T extends object>(choose: () => Promise<T>): Promise<T> {
    if (this.topology.process !== 0) {
      const sent = JSON.parse((await this.client.get(AUTO_KEY)).toString()) as
        { ok: true; choice: T } | { ok: false; message: string };
      if (!sent.ok)
        throw new TandemError('BAD_CONFIG', `host 0 could not pick a strategy for --strategy auto: ${sent.message}`);
      return sent.choice;
    }
    try {
      const choice = await choose();
      await this.client.set(AUTO_KEY, JSON.stringify({ ok: true, choice }));
      return choice;
    } catch (err) {
      await this.client.set(AUTO_KEY, JSON.stringify({ ok: false, message: (err as Error).message })).catch(() => {});
      throw err;
    }
  }

  /**
   * This host's wish to stop, after `step`, before it posts step+1. The last host to add its wish publishes the
   * verdict; step+1's all-reduce needs every host, so once step+1 ran anywhere every wish is in (stopAgreed). Each host
   * also leaves the count its wish made, so that a verdict that never came names the host
   * that added last (missingWishes).
   */
  async submitStop(step: number, wanted: boolean, regroup = false): Promise<void> {
    const key = stopKey(step);
    await this.betweenSteps(step, 'adding its stop wish', async () => {
      const count = await this.client.add(key, 1 + (wanted ? STOP_WEIGHT : 0) + (regroup ? REGROUP_WEIGHT : 0));
      await this.client.set(`${key}.host${this.topology.process}`, String(count));
      if (count % STOP_WEIGHT !== this.topology.processes) return;
      const stop = Math.floor(count / STOP_WEIGHT) % (REGROUP_WEIGHT / STOP_WEIGHT) > 0;
      const verdict: StepVerdict = stop ? 'stop' : count >= REGROUP_WEIGHT ? 'regroup' : 'go-on';
      await this.client.set(`${key}.agreed`, VERDICT_VALUES[verdict]);
    });
  }

  /**
   * Whether any host wished to stop after `step` (call it once `step` is applied here): the same answer on every host.
   */
  async stopAgreed(step: number): Promise<boolean> {
    return (await this.stepVerdict(step)) === 'stop';
  }

  /** What the hosts agreed to do after `step + 1` (their wishes after `step`): the same answer on every host. */
  async stepVerdict(step: number): Promise<StepVerdict> {
    const agreed = await this.betweenSteps(step + 1, 'reading the stop verdict', async () => {
      try {
        return await this.client.get(`${stopKey(step)}.agreed`, this.peerWaitMs);
      } catch (err) {
        if (!this.client.isOpen) throw err;
        throw await this.missingWishes(step); // the store answered: the verdict is not there
      }
    });
    const value = agreed.toString();
    return (Object.keys(VERDICT_VALUES) as StepVerdict[]).find(v => VERDICT_VALUES[v] === value) ?? 'go-on';
  }

  /** STALLED naming the hosts (rank and address) whose stop wish after `step` is not in the store. */
  private async missingWishes(step: number): Promise<TandemError> {
    const has = (key: string) =>
      this.client.get(key, 0).then(
        v => v.toString(),
        () => undefined,
      );
    const missing: string[] = [];
    let last: string | undefined;
    for (let r = 0; r < this.topology.processes; r++) {
      const count = await has(`${stopKey(step)}.host${r}`);
      const host = async () =>
        `${describeProcess(this.topology, r)} (${(await has(addressKey(r))) ?? 'address unknown'})`;
      if (count === undefined) missing.push(await host());
      else if (Number(count) % STOP_WEIGHT === this.topology.processes) last = await host();
    }
    const what =
      missing.length > 0
        ? `${missing.join(', ')} did not add its stop wish`
        : // every wish in: the last to add did not publish the verdict
          `${last ?? 'the last host to add its wish'} added the last stop wish but did not publish the verdict`;
    return new TandemError(
      'STALLED',
      `${describeProcess(this.topology, this.topology.process)}: ${what} after step ${step} within ` +
        (`${(this.peerWaitMs / 1000).toFixed(1)} s (a cut link or a frozen host; raise stallTimeoutMs if a host is ` +
          `legitimately this slow)`),
    );
  }

  /**
   * `call` to host 0's store after `step` (0: before the first); a closed connection, or no answer at all, as an error
   * naming host 0.
   */
  private async betweenSteps<T>(step: number, what: string, call: () => Promise<T>): Promise<T> {
    const host0 =
      `${describeProcess(this.topology, 0)} (${parseStoreUrl(this.client.url).host}, serving the ` +
      `rendezvous store ${this.client.url})`;
    const waitMs = this.peerWaitMs + NO_ANSWER_MARGIN_MS;
    const when = step > 0 ? `after step ${step}` : 'before the first step';
    let timer: NodeJS.Timeout | undefined;
    let silent: TandemError | undefined;
    const silence = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        silent = new TandemError(
          'STALLED',
          `${describeProcess(this.topology, this.topology.process)}: ${host0} did not answer within ` +
            `${(waitMs / 1000).toFixed(1)} s ` +
            (`${when} while ${what} (a cut link or a frozen host; raise stallTimeoutMs if host 0 is legitimately ` +
              `this slow)`),
        );
        reject(silent);
        this.client.close();
      }, waitMs);
    });
    try {
      return await Promise.race([call(), silence]);
    } catch (err) {
      if (err === silent || this.client.isOpen) throw err;
      throw new TandemError(
        'PEER_LOST',
        `${describeProcess(this.topology, this.topology.process)}: lost ${host0} ${when} while ${what}: ` +
          `${(err as Error).message}`,
        undefined,
        { cause: err },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /** This host's devices' digests of step `step`'s parameters (replica-check.ts). */
  async submitDigests(step: number, digests: string[]): Promise<void> {
    await this.client.set(`tandem.replicas.${step}.${this.topology.process}`, JSON.stringify(digests));
  }

  /** Every host's digests of `step`, by host (call it once step+1 is applied here: every host has published them). */
  async digestsOf(step: number): Promise<string[][]> {
    const hosts = Array.from({ length: this.topology.processes }, (_, h) =>
      this.client.get(`tandem.replicas.${step}.${h}`),
    );
    return (await Promise.all(hosts)).map(v => JSON.parse(v.toString()) as string[]);
  }

  /**
   * How many hosts run on the machine `machine` names (this host's: machine-id.ts), this one included. Every host
   * publishes its own and reads every host's: call it on every host at setup (it waits for them all).
   */
  async hostsSharingMachine(machine: string): Promise<number> {
    await this.client.set(machineKey(this.topology.process), machine);
    const hosts = Array.from({ length: this.topology.processes }, (_, h) => this.client.get(machineKey(h)));
    return (await Promise.all(hosts)).filter(id => id.toString() === machine).length;
  }

  /**
   * Returns once every host has called `meet(name)`. A host missing after the peer wait is STALLED, naming it and its
   * address, and `hint` (what may keep a host away); host 0's store gone is PEER_LOST (betweenSteps).
   */
  async meet(name: string, hint?: string): Promise<void> {
    const key = `tandem.meet.${name}`;
    await this.client.set(`${key}.host${this.topology.process}`, '1');
    if ((await this.client.add(key, 1)) === this.topology.processes) await this.client.set(`${key}.all`, '1');
    await this.betweenSteps(0, `meeting the other hosts before ${name}`, async () => {
      try {
        await this.client.get(`${key}.all`, this.peerWaitMs);
      } catch (err) {
        if (!this.client.isOpen) throw err;
        const has = (r: number) =>
          this.client.get(`${key}.host${r}`, 0).then(
            () => true,
            () => false,
          );
        const missing: string[] = [];
        for (let r = 0; r < this.topology.processes; r++) {
          if (!(await has(r)))
            missing.push(`${describeProcess(this.topology, r)} (${(await this.addressOf(r)) ?? 'address unknown'})`);
        }
        throw new TandemError(
          'STALLED',
          `${describeProcess(this.topology, this.topology.process)} waited ${(this.peerWaitMs / 1000).toFixed(1)} s ` +
            `for ${missing.join(', ') || 'the other hosts'} to reach ${name}${hint ? ` (${hint})` : ''}`,
        );
      }
    });
  }

  /** Host `r`'s published address, or undefined when it has none (yet). */
  private async addressOf(r: number): Promise<string | undefined> {
    return (await this.client.get(addressKey(r), 0).catch(() => undefined))?.toString();
  }

  /** Host 0: the port its monitor hub listens on. */
  async publishMonitorPort(port: number): Promise<void> {
    await this.client.set(MONITOR_KEY, String(port));
  }

  /** The port host 0's monitor hub listens on (waits for host 0 to publish it). */
  async monitorPort(): Promise<number> {
    return Number((await this.client.get(MONITOR_KEY)).toString());
  }

  close(): void {
    this.client.close();
  }
}
