/**
 * The CPU ceiling of a step. The schedule model (schedule-model.ts) runs a
 * device's compute queue and comm queue side by side, as if the comm work had
 * cores of its own; where a host's share of the machine's cores cannot hold
 * the CPU a step costs, the step lasts at least that CPU over those cores,
 * whatever the overlap: predicted = max(simulated period, CPU per step / cores).
 *
 * CPU per step = the calibrated trial's process CPU per steady step (compute,
 * the shared-memory exchange among this host's devices, the update, the
 * runtime's threads: profile-model.ts) + what the schedule adds across hosts
 * (per message: the link's cpu α + cpu β·wire bytes, link-fit.ts) + the comm
 * hook's compute (hook-costs.ts). A host's cores: the machine's, divided by
 * the tandem host processes that run on it (hosts sharing a boot id,
 * world/machine-id.ts).
 */
import os from 'node:os';

export interface CpuShare {
  /** Cores of this machine: os.availableParallelism(). */
  machineCores: number;
  /** Tandem host processes running on this machine, this one included. */
  hostsOnMachine: number;
}

/** This machine's cores, shared by `hostsOnMachine` host processes (at least 1). */
export function cpuShareOfHost(hostsOnMachine: number, machineCores = os.availableParallelism()): CpuShare {
  return { machineCores, hostsOnMachine: Math.max(1, hostsOnMachine) };
}

/** The cores one host may count on: its equal share of the machine's. */
export function hostCores(share: CpuShare): number {
  return share.machineCores / share.hostsOnMachine;
}

/** The shortest step `cpuMsPerStep` of CPU allows on this host's cores. */
export function cpuCeilingMs(cpuMsPerStep: number, share: CpuShare): number {
  return cpuMsPerStep / hostCores(share);
}

/** `2 cores shared by 2 hosts`, or `2 cores`. */
export function describeCpuShare(share: CpuShare): string {
  const cores = `${share.machineCores} core${share.machineCores === 1 ? '' : 's'}`;
  return share.hostsOnMachine > 1 ? `${cores} shared by ${share.hostsOnMachine} hosts` : cores;
}
