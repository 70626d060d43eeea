// The Node flags of tandem's worker threads: TANDEM_WORKER_EXEC_ARGV replaces the process's (a JSON array) and drops
// NODE_OPTIONS from the worker's environment, unset keeps both; a bad value is refused with the variable's name; a real
// device thread starts with the flags given.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { workerExecArgv, workerFlags, WORKER_EXEC_ARGV_ENV } from '../src/actors/worker-exec-argv.js';
import { train } from '../src/index.js';

t.test('parsing', async t => {
  t.equal(workerExecArgv({}), undefined, "unset: the process's flags (Node's default)");
  t.equal(workerExecArgv({ [WORKER_EXEC_ARGV_ENV]: '' }), undefined, 'empty: the same');
  t.same(workerExecArgv({ [WORKER_EXEC_ARGV_ENV]: '[]' }), [], '[]: none');
  t.same(workerExecArgv({ [WORKER_EXEC_ARGV_ENV]: '["--stack-size=2000"]' }), ['--stack-size=2000']);
  for (const bad of ['--import=x', '{}', '[1]', '"x"']) {
    t.throws(
      () => workerExecArgv({ [WORKER_EXEC_ARGV_ENV]: bad }),
      { code: 'BAD_CONFIG', message: /TANDEM_WORKER_EXEC_ARGV=.* is not a JSON array of strings/ },
      `refused: ${bad}`,
    );
  }
});

t.test('a worker started with them sees them, and no NODE_OPTIONS', async t => {
  const env = { [WORKER_EXEC_ARGV_ENV]: '["--no-warnings"]', NODE_OPTIONS: '--no-deprecation', KEPT: 'yes' };
  t.same(workerFlags({ KEPT: 'yes' }), {}, "unset: no options (Node's defaults)");
  const script = ['-e', 'code()'];
  t.same(workerFlags({}, ['--input-type=module', ...script]), { execArgv: script }, 'unset: --input-type=… left out');
  t.same(workerFlags({}, ['--input-type', 'module', ...script]), { execArgv: script }, 'and --input-type …');
  const seen = await new Promise<{ argv: string[]; options?: string; kept?: string }>((resolve, reject) => {
    const w = new Worker(
      'const { parentPort } = require("node:worker_threads"); ' +
        'parentPort.postMessage({ argv: process.execArgv, options: process.env.NODE_OPTIONS, kept: process.env.KEPT })',
      { eval: true, ...workerFlags(env) },
    );
    w.once('message', m => {
      resolve(m as { argv: string[] });
      void w.terminate();
    });
    w.once('error', reject);
  });
  t.same(seen, { argv: ['--no-warnings'], kept: 'yes' });
  t.equal(seen.options, undefined, 'NODE_OPTIONS left out');
});

t.test('a bad value stops a training before any device starts, naming the variable', async t => {
  const saved = process.env[WORKER_EXEC_ARGV_ENV];
  process.env[WORKER_EXEC_ARGV_ENV] = 'nope';
  t.teardown(() => {
    if (saved === undefined) delete process.env[WORKER_EXEC_ARGV_ENV];
    else process.env[WORKER_EXEC_ARGV_ENV] = saved;
  });
  await t.rejects(
    train({
      model: 'mlp',
      data: 'synthetic-images',
      imageSize: [4, 4, 1],
      classes: 2,
      datasetSize: 8,
      batch: 4,
      steps: 1,
      backend: 'cpu',
    }),
    { message: /TANDEM_WORKER_EXEC_ARGV=nope/ },
  );
});
