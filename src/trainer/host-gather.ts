/**
 * Several hosts: a gather of one JSON value per host over host 0's rendezvous store, for what the hosts agree on
 * outside the device threads (fit's argument check before the first step, its epoch logs and stop at each epoch's
 * end). Each gather opens its own connection (a few per epoch), publishes this host's value, reads every host's, and
 * marks that it read them; host 0 returns only once every host marked it, so that host 0 never ends the run (and
 * closes the store) while another host still reads. A host missing after `waitMs` is STALLED naming it; host 0's
 * store gone is PEER_LOST.
 */
import { TandemError } from '../errors.js';
import type { ResolvedConfig } from '../config-types.js';
import { StoreClient } from '../collectives/gloo/tcp-store-client.js';
import { storeUrl } from '../world/rendezvous.js';
import { describeProcess } from '../world/topology.js';
import type { RunHosts } from './run-types.js';

/** The gathers of the hosts of `cfg` under `scope` (undefined: one process), each waiting `waitMs` for every host. */
export function hostGather(
  cfg: Pick<ResolvedConfig, 'rendezvous' | 'topology'>,
  scope: string,
  waitMs: number,
): RunHosts | undefined {
  const { rendezvous, topology } = cfg;
  if (!rendezvous || topology.processes < 2) return undefined;
  const me = topology.process;
  const hosts = Array.from({ length: topology.processes }, (_, h) => h);
  const name = (h: number) => describeProcess(topology, h);
  return {
    process: me,
    processes: topology.processes,
    describe: name,
    gather: async <T>(what: string, value: T): Promise<T[]> => {
      const key = `tandem.gather.${scope}.${what}`;
      const client = await StoreClient.connect(storeUrl(rendezvous), waitMs).catch((err: unknown) => {
        throw lost(err);
      });
      try {
        await client.set(`${key}.host${me}`, JSON.stringify(value));
        const values: T[] = [];
        for (const h of hosts) values.push(JSON.parse((await read(client, `${key}.host${h}`, h)).toString()) as T);
        await client.set(`${key}.read${me}`, '1');
        if (me === 0) for (const h of hosts) await read(client, `${key}.read${h}`, h);
        return values;
      } finally {
        client.close();
      }
    },
  };

  function lost(err: unknown): TandemError {
    return new TandemError(
      'PEER_LOST',
      `${name(me)}: lost ${name(0)}'s rendezvous store during ${scope}: ${(err as Error).message}`,
      undefined,
      { cause: err },
    );
  }

  /** `key` (host `h`'s), waiting up to waitMs; STALLED naming `h` when it never comes, PEER_LOST if the store goes. */
  async function read(client: StoreClient, key: string, h: number): Promise<Buffer> {
    try {
      return await client.get(key);
    } catch (err) {
      if (!client.isOpen) throw lost(err);
      throw new TandemError(
        'STALLED',
        `${name(me)}: ${name(h)} did not reach ${scope} within ${(waitMs / 1000).toFixed(1)} s (a cut link, a ` +
          `frozen host, or a host that runs another program; raise stallTimeoutMs if a host is legitimately this slow)`,
      );
    }
  }
}
