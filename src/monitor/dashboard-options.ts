/** The dashboard section of a train config: the live page of the run that host 0 serves (dashboard-server.ts). */
import type { OptionTable } from '../options/declaration.js';
import { bad, shown } from '../config-checks.js';
import { nonEmpty } from '../options/option-checks.js';

export interface DashboardOptions {
  /**
   * Serve a live page of the run (host 0 serves the world's) on this port; `true` (the flag alone) or 0: a free port
   * the system picks. The address is the `dashboard` event's `url` (the CLI prints it).
   */
  dashboard?: number | true;
  /**
   * The address the dashboard listens on (default 127.0.0.1). Any address but the loopback one needs a random token in
   * the URL (printed once, in the `dashboard` event) for every request.
   */
  dashboardHost?: string;
}

export const DASHBOARD_OPTIONS: OptionTable<DashboardOptions> = {
  dashboard: {
    kind: 'optional-integer',
    group: 'output',
    hosts: 'own: a page this host serves',
    arg: '[PORT]',
    type: 'integer or true',
    doc: 'serve a live page of the run on 127.0.0.1:PORT (the flag alone: a free port; the address is printed)',
    check: (v, field) => {
      if (v === true) return true;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535)
        bad(field, `must be a port (an integer in [0, 65535], 0: any free one) or true, got ${shown(v)}`);
      return v;
    },
  },
  dashboardHost: {
    kind: 'string',
    group: 'output',
    hosts: 'own: a page this host serves',
    arg: 'ADDRESS',
    default: '127.0.0.1',
    doc: 'the address the dashboard listens on; any other than loopback requires the token printed in its URL',
    check: nonEmpty('must be an address to listen on, e.g. 127.0.0.1 or 0.0.0.0'),
  },
};
