// The dashboard in a real browser (Debian's chromium, headless, driven by puppeteer-core): a running
// `tandem train --dashboard` serves a page that updates as steps go (the test waits on the DOM, in the browser); the
// run is stopped by SIGINT once the page has shown it moving, and the page then shows the steps done, the final loss
// (4 decimals) and the samples/s of its summary.json, as text. `tandem dashboard RUN_DIR` shows the same values for
// the finished run. A screenshot of each is saved in the test's folder (TANDEM_KEEP_SCREENSHOTS=1 keeps it;
// docs/guide/dashboard.png is one of a longer run). Skipped without chromium, unless TANDEM_REQUIRE_BROWSER=1. Without
// a browser: off loopback the server refuses every request without the token (and a foreign Host on loopback), and
// with two hosts only host 0 serves, its feed (the event log) carrying every step of the world.
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { runTandem, spawnTandem } from './fixtures/cli-process.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { smallRunArgs } from './fixtures/small-run.js';
import { DashboardFeed } from '../src/monitor/dashboard-feed.js';
import { serveDashboard } from '../src/monitor/dashboard-server.js';

/** The page's DOM as the functions run in the browser (page.evaluate, waitForFunction) see it. */
interface Element {
  textContent: string | null;
  naturalWidth: number;
}
declare const document: {
  getElementById(id: string): Element | null;
  querySelector(selector: string): Element | null;
  querySelectorAll(selector: string): { length: number };
  body: { dataset: Record<string, string | undefined> };
};

/** A slow CI machine may take a while to start a run's threads: the DOM is waited on longer than puppeteer's 30 s. */
const WAIT = { timeout: 150_000 };
const CHROMIUM = process.env.TANDEM_CHROMIUM ?? '/usr/bin/chromium';
const FIGURES = ['steps-done', 'final-loss', 'samples-per-second', 'run-status', 'data-wait-share'] as const;
type Figures = Record<(typeof FIGURES)[number], string>;

interface Summary {
  steps: number;
  stoppedAt?: number;
  finalLoss: number;
  samplesPerSecond: number;
}

async function figures(page: Page): Promise<Figures> {
  return page.evaluate(
    (ids: readonly string[]) =>
      Object.fromEntries(ids.map(id => [id, document.getElementById(id)?.textContent ?? ''])) as Figures,
    FIGURES,
  );
}

/** What the page must show of `summary`, as text. */
function expected(summary: Summary): Partial<Figures> {
  return {
    'steps-done': String(summary.steps),
    'final-loss': summary.finalLoss.toFixed(4),
    'samples-per-second': summary.samplesPerSecond.toFixed(1),
    'run-status': summary.stoppedAt === undefined ? 'finished' : `stopped after step ${summary.stoppedAt}`,
  };
}

/** Charts drawn (uPlot loaded from the server) and the timeline picture decoded. */
async function drawn(page: Page): Promise<{ canvases: number; timelineWidth: number; events: string }> {
  await page.waitForFunction(() => document.getElementById('timeline')!.naturalWidth > 0, WAIT);
  return page.evaluate(() => ({
    canvases: document.querySelectorAll('.charts canvas').length,
    timelineWidth: document.getElementById('timeline')!.naturalWidth,
    events: document.getElementById('events')?.textContent ?? '',
  }));
}

function statusOf(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, res => {
      res.resume();
      resolve(res.statusCode ?? 0);
      res.destroy();
    });
    req.on('error', reject);
    req.end();
  });
}

async function browserTests(browser: Browser, dir: string): Promise<void> {
  const out = path.join(dir, 'run');
  await t.test('a live run: the page updates while it trains and ends on its summary', async t => {
    const args = [...smallRunArgs({ seed: 5, steps: 100000 }), '--devices', '2', '--backend', 'cpu'];
    const run = spawnTandem(['train', ...args, '--out', out, '--dashboard', '--json'], fn => t.teardown(fn));
    await run.waitFor('stdout', /"event":"dashboard".*\n/);
    const url = /"url":"([^"]+)"/.exec(run.stdout())![1];
    t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/, 'on loopback, no token');
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(url);
    await page.waitForFunction(() => Number(document.getElementById('steps-done')?.textContent) >= 2, WAIT);
    const seen = Number((await figures(page))['steps-done']);
    await page.waitForFunction(
      (before: number) => Number(document.getElementById('steps-done')?.textContent) > before,
      WAIT,
      seen,
    );
    t.pass(`the page went on from step ${seen} by itself (server-sent events)`);
    run.child.kill('SIGINT');
    await page.waitForFunction(() => document.body.dataset.ended === 'true', WAIT);
    const exit = await run.exited;
    t.equal(exit.code, 130, 'tandem train stopped on SIGINT');
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as Summary;
    t.ok(summary.stoppedAt !== undefined && summary.steps > seen, `summary.json: stopped after ${summary.steps}`);
    t.match(await figures(page), expected(summary), 'the DOM shows summary.json: steps, final loss, samples/s');
    const pictures = await drawn(page);
    t.equal(pictures.canvases, 5, 'five uPlot charts');
    t.ok(pictures.timelineWidth > 0, 'the timeline of the last steps');
    t.match(pictures.events, `stopped after step ${summary.steps}`, 'the events list');
    await page.screenshot({ path: path.join(dir, 'live.png'), fullPage: true });
    await page.close();
  });

  await t.test('tandem dashboard RUN_DIR: the finished run from its files', async t => {
    const serve = spawnTandem(['dashboard', out], fn => t.teardown(fn));
    await serve.waitFor('stdout', /dashboard: http\S+\n/);
    const url = /dashboard: (http\S+)/.exec(serve.stdout())![1];
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(url);
    await page.waitForFunction(() => document.body.dataset.ended === 'true', WAIT);
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as Summary;
    t.match(await figures(page), expected(summary), 'the same values as summary.json');
    const logged = readFileSync(path.join(out, 'events.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map(l => JSON.parse(l) as { kind: string; step?: { stepMs: number; dataWaitMs: number } })
      .flatMap(m => (m.kind === 'step' ? [m.step!] : []))
      .slice(-20);
    const meanOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const share = meanOf(logged.map(s => s.dataWaitMs)) / meanOf(logged.map(s => s.stepMs));
    t.equal(
      (await figures(page))['data-wait-share'],
      `${(100 * share).toFixed(1)}%`,
      "waiting for data: the last 20 steps' data wait over their step time, from the event log",
    );
    const pictures = await drawn(page);
    t.equal(pictures.canvases, 5, 'five uPlot charts');
    t.ok(pictures.timelineWidth > 0, 'the timeline, from trace.json');
    const steps = await page.evaluate(() => document.querySelector('#split tbody')?.textContent ?? '');
    t.match(steps, /device 0.*device 1.*host 0/s, 'the step-time table per device and per host');
    await page.screenshot({ path: path.join(dir, 'finished.png'), fullPage: true });
    await page.close();
    serve.child.kill('SIGINT');
    t.equal((await serve.exited).code, 0, 'tandem dashboard ends on SIGINT');
  });
}

const missing = existsSync(CHROMIUM) ? undefined : `no browser at ${CHROMIUM} (apt-get install chromium)`;
if (missing && process.env.TANDEM_REQUIRE_BROWSER === '1') t.fail(`TANDEM_REQUIRE_BROWSER=1 but ${missing}`);
else if (missing) t.plan(0, `skipped: ${missing}`);
else {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-dashboard-'));
  const keep = process.env.TANDEM_KEEP_SCREENSHOTS === '1';
  if (!keep) t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
  t.teardown(() => browser.close());
  await browserTests(browser, dir);
  t.comment(
    `screenshots: ${dir}/live.png, ${dir}/finished.png (${keep ? 'kept' : 'TANDEM_KEEP_SCREENSHOTS=1 keeps them'})`,
  );
}

t.test('off loopback every request needs the token; on loopback only the loopback name is answered', async t => {
  const feed = new DashboardFeed();
  const off = await serveDashboard(feed, { port: 0, host: '127.0.0.2' }); // loopback network, not the loopback name
  t.teardown(() => off.close());
  const token = new URL(off.url).searchParams.get('token');
  t.ok(token && token.length >= 24, 'a random token in the URL');
  const base = `http://127.0.0.2:${off.port}`;
  for (const route of ['/', '/events', '/dashboard.js', '/uPlot.iife.min.js']) {
    t.equal(await statusOf(`${base}${route}`), 403, `${route} without the token: refused`);
    t.equal(await statusOf(`${base}${route}?token=${token}x`), 403, `${route} with a wrong token: refused`);
  }
  t.equal(await statusOf(`${base}/dashboard.js?token=${token}`), 200, 'with the token: served');
  t.equal(await statusOf(`${base}/../package.json?token=${token}`), 404, 'no path outside the fixed list');
  t.equal(await statusOf(`${base}/%2e%2e/package.json?token=${token}`), 404, 'nor an encoded one');
  t.equal(await statusOf(`${base}/?token=${token}`, {}, 'POST'), 405, 'GET only');
  const on = await serveDashboard(feed, { port: 0 });
  t.teardown(() => on.close());
  t.equal(on.url, `http://127.0.0.1:${on.port}/`, 'loopback: no token');
  t.equal(await statusOf(on.url), 200, 'served at its loopback address');
  t.equal(
    await statusOf(on.url, { host: `attacker.example:${on.port}` }),
    403,
    'another Host (DNS rebinding): refused',
  );
});

t.test("two hosts: host 0 alone serves, and its feed (the event log) is the world's", async t => {
  if (!glooAddonOrSkip()) return;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-dashboard-hosts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'run');
  const args = [...smallRunArgs({ seed: 7, steps: 4 }), '--devices', '1', '--backend', 'cpu'];
  const run = await runTandem(['launch', '--hosts', '2', ...args, '--out', out, '--dashboard', '--json']);
  t.equal(run.code, 0, run.code === 0 ? 'tandem launch --hosts 2 exits 0' : run.stderr);
  t.match(run.stdout, /\[host 0\] \{"event":"dashboard"/, 'host 0 serves a page');
  t.notMatch(run.stdout, /\[host 1\] \{"event":"dashboard"/, 'host 1 does not');
  const lines = readFileSync(path.join(out, 'events.jsonl'), 'utf8').trim().split('\n');
  const steps = lines.map(
    l =>
      JSON.parse(l) as {
        kind: string;
        step?: { step: number; loss: number; hosts: number[]; exchangeBytes: number[] };
      },
  );
  const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as {
    history: { step: number; loss: number }[];
    parameters: number;
  };
  const logged = steps.filter(m => m.kind === 'step').map(m => m.step!);
  t.same(
    logged.map(s => [s.step, s.loss]),
    summary.history.map(h => [h.step, h.loss]),
    "every step with the world's loss",
  );
  t.ok(
    logged.every(s => s.hosts.join() === '0,1'),
    'each step has both devices, one on each host',
  );
  t.same(
    logged.map(s => s.exchangeBytes),
    logged.map(() => [4 * summary.parameters, 4 * summary.parameters]),
    "each device's bytes exchanged: its whole gradient, 4 bytes a parameter (no comm hook)",
  );
});
