/**
 * The replica check (`replicaCheckEvery` K): after every K-th step each local
 * device's parameter copy (its slot of the shared buffers) is digested
 * (replica-checksum.ts) and every digest of every host is compared with host
 * 0 device 0's. One process: at once. Several hosts: each publishes its
 * digests of step s over host 0's store and compares every host's once step
 * s+1 is applied (step s+1's all-reduce needs every host, so every digest is
 * in: the read never waits on a host that is gone, which fails that all-reduce
 * with PEER_LOST first). Every host reads the same digests, so every host ends
 * with REPLICA_DIVERGED after the same step. The last step is compared in one
 * process only (across hosts there is no step after it; compare the summary's
 * `replicaChecksum`).
 */
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { HostChannel } from '../world/host-channel.js';
import { globalRank } from '../world/topology.js';
import { replicaChecksum } from './replica-checksum.js';

export class ReplicaCheck {
  /** Several hosts: the step whose digests were published and are compared after the next step. */
  private published?: number;

  constructor(
    private readonly cfg: ResolvedConfig,
    private readonly channel?: HostChannel,
  ) {}

  /** Whether `afterApplied(step, …)` has work at this step (the caller then waits for the step's update). */
  due(step: number): boolean {
    const every = this.cfg.replicaCheckEvery;
    if (every === 0) return false;
    return this.published === step - 1 || (step % every === 0 && (!this.channel || step < this.cfg.steps));
  }

  /** `replicas`: this process's devices' parameters, as of `step` applied everywhere here. Throws REPLICA_DIVERGED. */
  async afterApplied(step: number, replicas: Float32Array[]): Promise<void> {
    if (this.channel && this.published === step - 1) {
      const published = this.published;
      this.published = undefined;
      compare(this.cfg, published, await this.channel.digestsOf(published));
    }
    if (this.cfg.replicaCheckEvery === 0 || step % this.cfg.replicaCheckEvery !== 0) return;
    const digests = replicas.map(replicaChecksum);
    if (!this.channel) {
      compare(this.cfg, step, [digests]);
      return;
    }
    if (step >= this.cfg.steps) return;
    await this.channel.submitDigests(step, digests);
    this.published = step;
  }
}

/** REPLICA_DIVERGED naming every (host, device) whose digest differs from host 0 device 0's. */
function compare(cfg: ResolvedConfig, step: number, byHost: string[][]): void {
  const reference = byHost[0][0];
  const differ: string[] = [];
  byHost.forEach((digests, host) =>
    digests.forEach((digest, local) => {
      if (digest === reference) return;
      const rank = globalRank({ ...cfg.topology, process: host }, local);
      differ.push(`${cfg.topology.processes > 1 ? `host ${host} ` : ''}device ${rank} (${digest})`);
    }),
  );
  if (differ.length === 0) return;
  const where = cfg.topology.processes > 1 ? 'host 0 device 0' : 'device 0';
  throw new TandemError(
    'REPLICA_DIVERGED',
    `the replicas' parameters differ after step ${step}: ${differ.join(', ')} against ${where} (${reference}); ` +
      ('every replica must hold the same bits, so the devices no longer train one model (a transport, method or ' +
        'plugin that updates ') +
      ('replicas differently, non-deterministic kernels across machines, or a hardware fault). Resume from a ' +
        'checkpoint written ') +
      `before step ${step} (--resume), try another transport or backend to find the culprit, and report it`,
  );
}
