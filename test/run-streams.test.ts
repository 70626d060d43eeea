// The run's streams cannot end the host process: a failed run completes them (the failure is the last event and
// `done`'s rejection), and an exception in a subscriber is one warning event while training goes on.
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { filter } from 'rxjs';
import { start, type RunEvent } from '../src/index.js';
import { runNode } from './fixtures/cli-process.js';

t.test(
  'subscribers without an error callback and a device that fails: the process lives on, done rejects, the streams ' +
    'complete',
  async t => {
    const script = fileURLToPath(new URL('./fixtures/streams-without-error-handler.js', import.meta.url));
    const r = await runNode(script, [], { timeoutMs: 60_000 });
    t.equal(r.code, 0, `the process ended on its own, normally (stderr: ${r.stderr.trim().split('\n').pop()})`);
    const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as {
      outcome: string;
      code: string;
      context: { device: number; step: number };
      events: string[];
      completed: string[];
    };
    t.equal(out.outcome, 'rejected', 'await run.done rejected');
    t.equal(out.code, 'DEVICE_FAILED');
    t.same([out.context.device, out.context.step], [1, 2], 'naming device 1, step 2');
    t.equal(out.events[out.events.length - 1], 'failed', 'the failure is the last event');
    t.same([...out.completed].sort(), ['events$', 'metrics$', 'timeline$'], 'every stream completed');
  },
);

t.test('subscribers that throw: one warning each, training goes on to the end', async t => {
  const run = start({
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [6, 6, 1],
    datasetSize: 120,
    batch: 12,
    steps: 6,
    devices: 2,
    backend: 'cpu',
  });
  const events: RunEvent[] = [];
  run.events$.subscribe(e => events.push(e));
  let calls = 0;
  run.metrics$.subscribe(() => {
    calls++;
    throw new Error('boom in metrics');
  });
  run.timeline$.pipe(filter(s => s.kind === 'exchange')).subscribe(() => {
    throw new Error('boom in a piped timeline');
  });
  const summary = await run.done;
  t.equal(summary.steps, 6, 'every step trained');
  t.equal(calls, 6, 'the throwing subscriber still received every step');
  const warnings = events.filter((e): e is Extract<RunEvent, { type: 'warning' }> => e.type === 'warning');
  t.equal(warnings.length, 2, 'one warning per throwing subscriber');
  t.match(
    warnings.find(w => w.message.includes('metrics$'))?.message,
    /a subscriber of metrics\$ threw Error: boom in metrics; training goes on/,
  );
  t.match(warnings.find(w => w.message.includes('timeline$'))?.message, /boom in a piped timeline/);
  t.equal(events[events.length - 1].type, 'finished');
});
