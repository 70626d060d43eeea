/**
 * The fixed list of files the dashboard serves, by route: its page, script and style (dashboard-page.ts), and uPlot's
 * script and style, read from the installed `uplot` package when first asked for (no CDN: it works offline). Where
 * uplot is not installed (the GPU check's bundle leaves it out) the page says so and shows its values as text.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { PAGE_CSS, pageHtml } from './dashboard-page.js';
import { PAGE_SCRIPT } from './dashboard-script.js';

export interface DashboardAsset {
  type: string;
  /** The body; undefined (or a throw): not there. */
  body(token: string | undefined): Promise<string | undefined>;
  /** What a 404 for it says. */
  missing?: string;
}

const UPLOT_MISSING = 'uplot is not installed (npm install uplot@1.6.32): the dashboard shows its values as text';

/** A file of the installed uplot package (`dist/…`), read once. */
function uplotFile(name: string): () => Promise<string | undefined> {
  let text: Promise<string | undefined> | undefined;
  return () => {
    text ??= (async () => {
      const require = createRequire(import.meta.url);
      const dir = path.dirname(require.resolve('uplot/package.json'));
      return readFile(path.join(dir, 'dist', name), 'utf8');
    })().catch(() => undefined);
    return text;
  };
}

const uplotScript = uplotFile('uPlot.iife.min.js');
const uplotStyle = uplotFile('uPlot.min.css');

export const DASHBOARD_ASSETS: Readonly<Record<string, DashboardAsset>> = {
  '/': { type: 'text/html; charset=utf-8', body: async token => pageHtml(token) },
  '/dashboard.js': { type: 'text/javascript; charset=utf-8', body: async () => PAGE_SCRIPT },
  '/dashboard.css': { type: 'text/css; charset=utf-8', body: async () => PAGE_CSS },
  '/uPlot.iife.min.js': { type: 'text/javascript; charset=utf-8', body: uplotScript, missing: UPLOT_MISSING },
  '/uPlot.min.css': { type: 'text/css; charset=utf-8', body: uplotStyle, missing: UPLOT_MISSING },
};
