/**
 * Who is in a job: processes (hosts, or one process per GPU) × the device
 * actors of each process. "Replicas in the job" — the global batch split, the
 * label partition, the mean of an all-reduce — use the world; "threads here"
 * — actors, control words, shared-memory slots, loader slots — use the local
 * count. A device is named by its global rank; inside its process it is
 * local device `globalRank - process * localDevices`.
 */
export interface Topology {
  /** Processes in the job. */
  processes: number;
  /** This process's rank, in [0, processes). */
  process: number;
  /** Devices (actors) in every process. */
  localDevices: number;
  /**
   * What each process is, for messages: absent or 'host' (a machine, `launch --hosts`), 'gpu' (`launch --gpus`: one
   * process per GPU).
   */
  processKind?: ProcessKind;
}

/** What a process of the job is, as messages name it. */
export type ProcessKind = 'host' | 'gpu';

/**
 * Process `k` of a job in words, as every message names it: `host k`, or `GPU process k` (as `tandem launch --gpus`
 * names it).
 */
export function describeProcess(job: { processKind?: ProcessKind }, k: number): string {
  const kind = job.processKind ?? 'host';
  switch (kind) {
    case 'host':
      return `host ${k}`;
    case 'gpu':
      return `GPU process ${k}`;
    default: {
      const never: never = kind;
      throw new Error(`unknown process kind ${String(never)}`);
    }
  }
}

/** The topology of a job that is this one process. */
export function singleProcess(localDevices: number): Topology {
  return { processes: 1, process: 0, localDevices };
}

/** Replicas in the job. */
export function worldSize(t: Topology): number {
  return t.processes * t.localDevices;
}

/** The global rank of this process's local device `local`. */
export function globalRank(t: Topology, local: number): number {
  return t.process * t.localDevices + local;
}

/** The global ranks of this process's devices, in local order. */
export function localRanks(t: Topology): number[] {
  return Array.from({ length: t.localDevices }, (_, d) => globalRank(t, d));
}

/**
 * The topology of process `process` of `processes`, each with `localDevices` devices (processes of kind `processKind`,
 * default hosts).
 */
export function multiProcess(
  processes: number,
  process: number,
  localDevices: number,
  processKind?: ProcessKind,
): Topology {
  return processKind === undefined
    ? { processes, process, localDevices }
    : { processes, process, localDevices, processKind };
}
