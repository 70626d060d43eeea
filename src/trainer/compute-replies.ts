/**
 * Matches the compute threads' replies to the main thread's requests, by
 * (type, step): `expect('stepDone', 7)` resolves with every device's reply to
 * step 7, typed as that reply. Register before posting the request. A
 * request that some device leaves unanswered for the watchdog's time calls
 * `onSilent` with the devices that did not reply (and a way to ask whether
 * the request is still unanswered).
 */
import type { FromCompute } from '../actors/protocol.js';

type ReplyType = Exclude<FromCompute['type'], 'error'>;
export type Reply<T extends ReplyType> = Extract<FromCompute, { type: T }>;

interface Waiter {
  got: FromCompute[];
  resolve(msgs: FromCompute[]): void;
}

export class ComputeReplies {
  private readonly waiters = new Map<string, Waiter>();

  constructor(
    private readonly devices: readonly number[],
    private readonly watchdogMs: number,
    private readonly onSilent: (silent: number[], unanswered: () => boolean) => void,
  ) {}

  /**
   * Resolves with one reply of `type` (for `step`, when the reply carries one) from every device, in device order.
   * `watchdogMs` overrides the watchdog for this request (setup, which loads engines and builds models, gets longer).
   * `armAfter`: the watchdog starts when it settles (a step posted ahead waits for the step before it to end first).
   */
  expect<T extends ReplyType>(
    type: T,
    step?: number,
    watchdogMs = this.watchdogMs,
    armAfter?: Promise<unknown>,
  ): Promise<Reply<T>[]> {
    const key = keyOf(type, step);
    if (this.waiters.has(key)) throw new Error(`replies of ${key} are already awaited`);
    return new Promise(resolve => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waiter: Waiter = {
        got: [],
        resolve: msgs => {
          clearTimeout(timer);
          resolve(msgs.sort((a, b) => a.device - b.device) as Reply<T>[]);
        },
      };
      // Watchdog: a device that stops responding is named here, where it is known who is silent.
      const arm = () => {
        if (this.waiters.get(key) !== waiter) return;
        timer = setTimeout(() => {
          if (this.waiters.get(key) === waiter)
            this.onSilent(
              this.devices.filter(d => !waiter.got.some(m => m.device === d)),
              () => this.waiters.get(key) === waiter,
            );
        }, watchdogMs);
        timer.unref();
      };
      this.waiters.set(key, waiter);
      if (armAfter) armAfter.then(arm, arm);
      else arm();
    });
  }

  /** A reply arrived; true when someone awaited it. */
  deliver(msg: Exclude<FromCompute, { type: 'error' }>): boolean {
    const key = keyOf(msg.type, 'step' in msg ? msg.step : undefined);
    const w = this.waiters.get(key);
    if (!w) return false;
    w.got.push(msg);
    if (w.got.length === this.devices.length) {
      this.waiters.delete(key);
      w.resolve(w.got);
    }
    return true;
  }
}

function keyOf(type: string, step: number | undefined): string {
  return step === undefined ? type : `${type}@${step}`;
}
