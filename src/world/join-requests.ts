/**
 * Admitting a host into an elastic run that already began (trainer/elastic-run.ts), over host 0's store, outside any
 * generation's keys:
 * - a host started into a run whose first generation already met (its rank's address is in the store: an earlier
 *   process of that rank joined it, so this one was restarted, as by `tandem launch --max-restarts`) asks to join: it
 *   takes a ticket, leaves its rank under the ticket, and waits for host 0's answer;
 * - host 0 watches for requests on a store connection of its own (nothing on any host's step path), and while one
 *   waits its wish after each step is to regroup (run-controller.ts; a host started with other flags is refused at
 *   once: admitted, its first step's flag agreement would end the whole run): every host ends the generation after
 *   the step they agree on, and the regroup (regroup.ts) admits the waiting hosts the run has room for (`--hosts`, the
 *   most);
 * - host 0 publishes the state of that step (parameters, optimizer state) under the next generation's keys, then
 *   answers each admitted host with its place in it; the next generation's start broadcasts host 0's parameters to
 *   every replica, as at every start. A run that ends first tells each waiting host so.
 */
import { TandemError } from '../errors.js';
import { StoreClient } from '../collectives/gloo/tcp-store-client.js';
import { decodeCheckpoint, encodeCheckpoint, type Checkpoint } from '../checkpoint/checkpoint-file.js';
import { addressTowards, storeUrl, type Rendezvous } from './rendezvous.js';
import { addressKey } from './host-channel.js';
import { generationPrefix, type JoinRequest } from './regroup.js';
import { flagDifferences, type HostFlags } from './host-flags.js';

/** Host 0's answer to a join request: the host's place in the generation it joins, or why it joins none. */
export type Admission =
  | { kind: 'admitted'; generation: number; hosts: number; hostRank: number; step: number }
  | { kind: 'ended'; reason: string };

/**
 * Set by `tandem launch` in the environment of a host it restarted (the restart's number): its run already began, so
 * host 0's store answers at once unless the run has ended (startedBefore waits for it only this long).
 */
export const RESTART_ENV = 'TANDEM_LAUNCH_RESTART';
const RESTARTED_WAIT_MS = 5_000;

/** How long one wait for a key lasts before it is asked again (the store's waits are bounded). */
const WATCH_MS = 60_000;
const TICKETS_KEY = 'tandem.elastic.joins';
const joinKey = (ticket: number) => `tandem.elastic.join.${ticket}`;
const admitKey = (ticket: number) => `tandem.elastic.admit.${ticket}`;
const stateKey = (generation: number) => `${generationPrefix(generation)}elastic.state`;

/**
 * Whether host `rank` of the run meeting at `rendezvous` was started before (its address from the first generation is
 * in host 0's store): it then asks to join (askToJoin) instead of meeting the first generation.
 */
export async function startedBefore(
  rendezvous: Rendezvous,
  rank: number,
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
): Promise<boolean> {
  const restart = env[RESTART_ENV];
  if (restart === undefined) await addressTowards(rendezvous, timeoutMs);
  else {
    await addressTowards(rendezvous, RESTARTED_WAIT_MS).catch((err: unknown) => {
      throw new TandemError(
        'ABORTED',
        `host ${rank}, restarted by tandem launch (restart ${restart}), finds host 0's rendezvous store gone: ` +
          `the run ended meanwhile, or host 0 was lost (${(err as Error).message})`,
        undefined,
        { cause: err },
      );
    });
  }
  const client = await StoreClient.connect(storeUrl(rendezvous), timeoutMs, undefined, timeoutMs);
  try {
    return await client.get(`${rendezvous.prefix ?? ''}${addressKey(rank)}`, 0).then(
      () => true,
      () => false,
    );
  } finally {
    client.close();
  }
}

/**
 * A restarted host `rank`: asks host 0 to be admitted and waits (as long as the run lasts) for its answer; admitted,
 * with the state of the step the generation it joins starts from. PEER_LOST when host 0's store goes away meanwhile.
 */
export async function askToJoin(
  store: string,
  rank: number,
  flags: HostFlags,
  timeoutMs: number,
): Promise<{ admission: Admission; state?: Checkpoint }> {
  const client = await StoreClient.connect(store, WATCH_MS, undefined, timeoutMs);
  try {
    const ticket = await client.add(TICKETS_KEY, 1);
    await client.set(joinKey(ticket), JSON.stringify({ rank, flags }));
    const admission = JSON.parse((await waitFor(client, admitKey(ticket))).toString()) as Admission;
    if (admission.kind === 'ended') return { admission };
    const bytes = await client.get(stateKey(admission.generation), timeoutMs);
    const state = decodeCheckpoint(bytes, `host 0's state of step ${admission.step}, sent over the rendezvous store`);
    return { admission, state };
  } catch (err) {
    if (client.isOpen) throw err;
    throw new TandemError(
      'PEER_LOST',
      `host 0, which serves the rendezvous store ${store}, was lost while host ${rank} (restarted) waited to be ` +
        `admitted into the elastic run (${(err as Error).message}); restart the job from its last checkpoint`,
      undefined,
      { cause: err },
    );
  } finally {
    client.close();
  }
}

/** `key`'s value, however long it takes to be set (while the connection stays open). */
async function waitFor(client: StoreClient, key: string): Promise<Buffer> {
  for (;;) {
    try {
      return await client.get(key, WATCH_MS);
    } catch (err) {
      if (!client.isOpen) throw err;
    }
  }
}

/** Host 0 of an elastic run: the hosts waiting to be admitted, and their answers. */
export class JoinWatch {
  private readonly requests: JoinRequest[] = [];
  private next = 1;

  /** Host 0's model as flags, once it is built (`knowModel`): a request is compared with it too. */
  private model: Promise<HostFlags>;
  private knownModel!: (flags: HostFlags) => void;

  private constructor(
    private readonly watcher: StoreClient,
    private readonly writer: StoreClient,
    private readonly flags: HostFlags,
    private readonly refused: (reason: string) => void,
  ) {
    this.model = new Promise(resolve => (this.knownModel = resolve));
    void this.watch();
  }

  /** Host 0's model, built (host-flags.ts's modelFlags): a restarted host must have built the same one. */
  knowModel(flags: HostFlags): void {
    this.knownModel(flags);
  }

  /** `flags`: host 0's (a host asking with others is refused, and `refused` told why). */
  static async open(
    store: string,
    timeoutMs: number,
    flags: HostFlags,
    refused: (reason: string) => void,
  ): Promise<JoinWatch> {
    const watcher = await StoreClient.connect(store, WATCH_MS, undefined, timeoutMs);
    const writer = await StoreClient.connect(store, timeoutMs, undefined, timeoutMs).catch((err: unknown) => {
      watcher.close();
      throw err;
    });
    return new JoinWatch(watcher, writer, flags, refused);
  }

  /** The hosts waiting to be admitted, in the order they asked. */
  get waiting(): readonly JoinRequest[] {
    return this.requests;
  }

  private async watch(): Promise<void> {
    while (this.watcher.isOpen) {
      const said = await waitFor(this.watcher, joinKey(this.next)).catch(() => undefined);
      if (!said) return; // closed
      const ticket = this.next++;
      const asked = JSON.parse(said.toString()) as { rank?: unknown; flags?: HostFlags };
      const rank = Number(asked.rank);
      if (!Number.isInteger(rank)) continue;
      const mine = { ...this.flags, ...(await this.model) };
      const differences = flagDifferences(mine, asked.flags ?? {}, 'on host 0', `on host ${rank}`);
      if (differences.length === 0) {
        this.requests.push({ ticket, rank });
        continue;
      }
      const reason =
        `host ${rank} (restarted) was started with different flags — ${differences.join('; ')}: restart it with ` +
        `the run's command (only the options marked own in docs/reference/options.md may differ, and a model path ` +
        `must give the same model)`;
      this.refused(reason);
      const ended: Admission = { kind: 'ended', reason };
      await this.writer.set(admitKey(ticket), JSON.stringify(ended)).catch(() => {});
    }
  }

  /**
   * Generation `generation` admits `admitted` (each waiting host with its place): the state it starts from, published
   * first, then each host's answer.
   */
  async admit(generation: number, state: Checkpoint, admitted: { request: JoinRequest; admission: Admission }[]) {
    if (admitted.length === 0) return;
    await this.writer.set(stateKey(generation), encodeCheckpoint(state));
    for (const { request, admission } of admitted) {
      await this.writer.set(admitKey(request.ticket), JSON.stringify(admission));
      this.requests.splice(this.requests.indexOf(request), 1);
    }
  }

  /** The run ended (`reason`): each waiting host is told so. */
  async close(reason: string): Promise<void> {
    this.watcher.close();
    const ended: Admission = { kind: 'ended', reason };
    for (const r of this.requests.splice(0))
      await this.writer.set(admitKey(r.ticket), JSON.stringify(ended)).catch(() => {});
    this.writer.close();
  }
}
