/**
 * `tandem dashboard RUN_DIR [--port P] [--host ADDRESS]`: serves the dashboard of a finished run from its files
 * (finished-run.ts) until SIGINT or SIGTERM. The same page and server as a live run's (`tandem train --dashboard`).
 */
import { parseArgs } from 'node:util';
import { TandemError } from '../errors.js';
import { serveDashboard } from '../monitor/dashboard-server.js';
import { flagNumber } from './flag-number.js';
import { finishedRunFeed } from './finished-run.js';

export const DASHBOARD_USAGE = 'tandem dashboard RUN_DIR [--port P] [--host ADDRESS]';

export async function dashboardCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: { port: { type: 'string' }, host: { type: 'string' } },
    });
  } catch (err) {
    throw new TandemError('BAD_CONFIG', `tandem dashboard: ${(err as Error).message}; usage: ${DASHBOARD_USAGE}`);
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new TandemError('BAD_CONFIG', `usage: ${DASHBOARD_USAGE}`);
  const port = values.port === undefined ? 0 : flagNumber('port', values.port, 'integer');
  if (port < 0 || port > 65535) throw new TandemError('BAD_CONFIG', `--port must be in [0, 65535], got ${port}`);
  const feed = finishedRunFeed(positionals[0], line => console.error(`tandem dashboard: ${line}`));
  const server = await serveDashboard(feed, {
    port,
    host: values.host,
    flags: { port: '--port', host: '--host' },
  });
  console.log(`dashboard: ${server.url}`);
  console.log('(Ctrl-C ends it)');
  await new Promise<void>(resolve => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  await server.close();
  return 0;
}
