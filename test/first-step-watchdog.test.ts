// The run's first step is setup's, not a step's: a busy machine's cold start (a loader thread still importing, a
// first forward compiling, the comm thread's first update) is slow, not hung. A thread held 1.5 s in its first step's
// load, forward, backward or update under a 0.7 s stall timeout (its threads wait on each other 1.4 s) trains: the
// first step has the setup watchdog (60 s), on the main thread and on both threads of each device. The same stall
// timeout still names a device that stops responding in the second step. (Before, the held first step failed as
// STALLED: the loader's batch was watched by the stall timeout, the threads' waits by twice it.)
import t from 'tap';

import { train, type TrainConfig } from '../src/index.js';
import { SMALL_RUN } from './fixtures/small-run.js';
import { FAULT_PHASES, SLOW_FAULT_MS, withFault } from './fixtures/fault-plugin.js';

const STALL_MS = 700;
const base: TrainConfig = { ...SMALL_RUN, stallTimeoutMs: STALL_MS };

t.ok(SLOW_FAULT_MS > 2 * STALL_MS, 'the hold outlasts the threads’ wait on each other in a later step');

const reference = train({ ...base, stallTimeoutMs: 60_000 });

for (const phase of FAULT_PHASES) {
  t.test(
    `device 1 held ${SLOW_FAULT_MS} ms in step 1's ${phase} (stall timeout ${STALL_MS} ms): it trains`,
    async t => {
      const summary = await train({ ...base, ...withFault({ device: 1, step: 1, phase, kind: 'slow' }) });
      t.equal(summary.steps, 2, 'both steps trained');
      t.equal(summary.replicaChecksum, (await reference).replicaChecksum, 'to the bits of a run held nowhere');
    },
  );
}

t.test('a device that stops responding in step 2, under the same stall timeout: STALLED, naming it', async t => {
  await t.rejects(train({ ...base, ...withFault({ device: 1, step: 2, phase: 'forward', kind: 'hang' }) }), {
    code: 'STALLED',
    message: /device 1 stopped responding at step 2 in phase forward/,
    context: { device: 1, step: 2, phase: 'forward' },
  });
});
