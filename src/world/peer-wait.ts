/**
 * How long a process waits on a peer process (a Gloo call, the host channel's store, the hosts' stop
 * agreement) before it names that peer lost: twice the stall timeout, so a peer that is only stalled
 * (its own watchdog fires after one stall timeout and speaks first) is not taken for dead.
 */
export function peerWaitMs(stallTimeoutMs: number): number {
  return 2 * stallTimeoutMs;
}
