// Names that are markup, in a real browser (Debian's chromium, headless, driven by puppeteer-core): a run title, a
// configuration and event messages holding HTML and script reach the page as text — shown as written, no element made
// of them, no script run. Skipped without chromium, unless TANDEM_REQUIRE_BROWSER=1.
import t from 'tap';
import { existsSync } from 'node:fs';
import puppeteer from 'puppeteer-core';
import { DashboardFeed } from '../src/monitor/dashboard-feed.js';
import { serveDashboard } from '../src/monitor/dashboard-server.js';

interface Element {
  textContent: string | null;
}
declare const document: {
  getElementById(id: string): Element | null;
  querySelectorAll(selector: string): { length: number };
  body: { dataset: Record<string, string | undefined> };
};
declare const window: Record<string, unknown>;

const CHROMIUM = process.env.TANDEM_CHROMIUM ?? '/usr/bin/chromium';
const TITLE = '<img src=x onerror="window.__xss=1">tandem: <b>bold</b>';
const WARNING = '</li><script>window.__xss=2</script><img src=x onerror="window.__xss=3">';
const CONFIG = { model: '</pre><script>window.__xss=4</script>', 'a/b c ü': '<svg onload="window.__xss=5">' };

const missing = existsSync(CHROMIUM) ? undefined : `no browser at ${CHROMIUM} (apt-get install chromium)`;
if (missing && process.env.TANDEM_REQUIRE_BROWSER === '1') t.fail(`TANDEM_REQUIRE_BROWSER=1 but ${missing}`);
else if (missing) t.plan(0, `skipped: ${missing}`);
else
  t.test('a title, configuration and events holding markup are shown as text, and run nothing', async t => {
    const feed = new DashboardFeed();
    feed.publish({ kind: 'config', title: TITLE, config: CONFIG });
    feed.publish({ kind: 'event', event: { type: 'warning', step: 3, message: WARNING } });
    feed.publish({ kind: 'event', event: { type: 'failed', message: WARNING } });
    feed.publish({ kind: 'end' });
    const server = await serveDashboard(feed, { port: 0 });
    t.teardown(() => server.close());
    const browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
    t.teardown(() => browser.close());
    const page = await browser.newPage();
    await page.goto(server.url);
    await page.waitForFunction(() => document.body.dataset.ended === 'true', { timeout: 60_000 });
    const seen = await page.evaluate(() => ({
      title: document.getElementById('run-title')?.textContent,
      events: document.getElementById('events')?.textContent,
      config: document.getElementById('config')?.textContent,
      made: document.querySelectorAll('#run-title *, #events li *, #config *, img[src="x"], svg[onload]').length,
      ran: window.__xss,
    }));
    t.equal(seen.title, TITLE, 'the title as written');
    t.equal(seen.events, `warning at step 3: ${WARNING}failed: ${WARNING}`, 'the messages as written');
    t.same(JSON.parse(seen.config ?? ''), CONFIG, 'the configuration as written');
    t.equal(seen.made, 0, 'no element made of the markup');
    t.equal(seen.ran, undefined, 'no script ran');
  });
