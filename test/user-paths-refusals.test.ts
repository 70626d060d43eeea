// More paths a new user takes, refused or warned before they cost anything: an emulated link too slow for the
// stall watchdog, a plugin that is not there, PowerSGD's options with another hook, checkpoints into another run's
// directory, and abort() before the run has started anything.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startTraining, train, type TrainConfig } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';

import { optionsForPickedHook } from '../src/pipeline/resolve-comm-hook.js';
import { SMALL_RUN } from './fixtures/small-run.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-user-paths-'));
const base: TrainConfig = SMALL_RUN;

t.test(
  'an emulated link slower than the stall watchdog allows is refused before step 1 (it used to fail as STALLED, ' +
    'blaming the devices)',
  async t => {
    // A first run warms the process (its loader thread's modules load in it), as the cases before this one did when
    // it was in user-paths.test.ts: cold, a busy machine's first batch can take longer than the 2 s suggested below.
    await train(base);
    // mlp's gradients: about 1.3 s a step on it
    const slow: TrainConfig = { ...base, link: '400kbps', stallTimeoutMs: 300 };
    let message = '';
    await t.rejects(
      train(slow).catch((err: Error) => {
        message = err.message;
        throw err;
      }),
      {
        code: 'BAD_CONFIG',
        message:
          /^--link 400kbps \(EMULATED\) would hold every step's exchange \d+\.\d s \(1 hold\(s\).*stallTimeoutMs 0\.3 s\).*--stall-timeout-ms (\d+) or more$/,
      },
    );
    const suggested = Number(/--stall-timeout-ms (\d+)/.exec(message)?.[1]);
    const summary = await train({ ...slow, stallTimeoutMs: suggested });
    t.equal(summary.steps, 2, `with the suggested --stall-timeout-ms ${suggested} it trains`);
    await t.rejects(
      train({ ...base, link: '1bps' }),
      { code: 'BAD_CONFIG', message: /would hold every step's exchange \d+ s .*Give a faster link$/ },
      'no suggestion beyond the largest stallTimeoutMs',
    );
  },
);

t.test(
  'a plugin that is not there is named by its flag, without a "builtin name" or a "plugins factory" (there are ' +
    'neither)',
  async t => {
    const before = osThreads();
    await t.rejects(train({ ...base, plugins: ['my-plugin'] }), {
      code: 'MODULE_NOT_FOUND',
      message:
        /^--plugin my-plugin: no such file \(.*my-plugin\)\. Give the path of an ES module that registers a transport, method or engine/,
    });
    await t.rejects(
      train({ ...base, plugins: ['my-plugin'] }),
      { message: /^(?![\s\S]*(builtin name or|plugins factory))/ },
      'not the model and data wording',
    );
    t.equal(osThreads(), before, 'no thread started');
  },
);

t.test(
  "PowerSGD's options with --comm-hook fp16 or bf16 are refused (they were ignored); auto's pick of fp16 drops them",
  async t => {
    const before = osThreads();
    await t.rejects(train({ ...base, commHook: 'fp16', commHookOptions: { rank: 4 } }), {
      code: 'BAD_CONFIG',
      message:
        /^config\.commHookOptions\.rank: applies to the powersgd hook only, and this run's hook is fp16.*leave out --powersgd-rank, or give --comm-hook powersgd/,
    });
    await t.rejects(train({ ...base, commHook: 'bf16', commHookOptions: { warmStart: false } }), {
      code: 'BAD_CONFIG',
      message: /warmStart: .*leave out --no-warm-start/,
    });
    t.equal(osThreads(), before, 'no thread started');
    t.equal(
      (await train({ ...base, commHook: 'fp16', commHookOptions: { errorFeedback: false } })).steps,
      2,
      "fp16's own option trains",
    );
    t.same(
      optionsForPickedHook('fp16', { rank: 4, errorFeedback: false }),
      { errorFeedback: false },
      'auto picked fp16: PowerSGD options dropped',
    );
    t.same(optionsForPickedHook('bf16', { rank: 4 }), undefined);
    t.same(optionsForPickedHook('powersgd', { rank: 4 }), { rank: 4 }, 'auto picked powersgd: kept');
  },
);

t.test(
  "a run that checkpoints into a directory holding another run's checkpoints, without resuming from them, is warned " +
    '(it replaced them silently)',
  async t => {
    const ckpt = path.join(dir, 'two-runs');
    const warnings = async (config: TrainConfig) => {
      const seen: string[] = [];
      await train(config, {
        onEvent: e => {
          if (e.type === 'warning') seen.push(e.message);
        },
      });
      return seen;
    };
    t.same(
      await warnings({ ...base, steps: 2, checkpointEvery: 2, checkpointDir: ckpt }),
      [],
      'an empty directory: no warning',
    );
    const second = await warnings({ ...base, steps: 2, lr: 0.1, checkpointEvery: 2, checkpointDir: ckpt });
    t.equal(second.length, 1, 'one warning');
    t.match(
      second[0],
      new RegExp(
        `^${ckpt} already holds 1 checkpoint\\(s\\) of an earlier run \\(step 2\\) and this run does not resume ` +
          `from them: ` +
          'its checkpoints of the same steps replace them.*give --resume .*another --checkpoint-dir',
      ),
    );
    t.same(
      await warnings({ ...base, lr: 0.1, steps: 4, checkpointEvery: 2, checkpointDir: ckpt, resume: ckpt }),
      [],
      'resuming from the directory: no warning',
    );
    t.same(
      await warnings({
        ...base,
        lr: 0.1,
        steps: 6,
        checkpointEvery: 2,
        checkpointDir: ckpt,
        resume: path.join(ckpt, 'checkpoint-000000004.tandem'),
      }),
      [],
      'resuming from a checkpoint file of the directory: no warning',
    );
  },
);

t.test(
  "abort() before the run has started anything (two stop signals during auto's profiling): done rejects and no " +
    'thread is left (the run used to start its threads after the abort, and the process never ended)',
  async t => {
    const before = osThreads();
    for (const config of [
      { ...base, out: path.join(dir, 'abort-at-once') },
      { ...base, strategy: 'auto', out: path.join(dir, 'abort-auto') },
    ] as TrainConfig[]) {
      const run = startTraining(config);
      run.abort();
      await t.rejects(
        run.done,
        {
          code: 'ABORTED',
          message: /^run aborted: on request during step 0; no checkpoint: training had not started$/,
        },
        `${config.strategy ?? 'sequential'}: ABORTED`,
      );
      const deadline = Date.now() + 10_000;
      while (osThreads() > before && Date.now() < deadline) await new Promise(r => setTimeout(r, 100));
      t.ok(osThreads() <= before, `${config.strategy ?? 'sequential'}: no thread left (${osThreads()} <= ${before})`);
    }
  },
);
