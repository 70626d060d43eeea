// fit across hosts, real processes and Gloo over sockets on 127.0.0.1: two processes each call tandem's fit with the
// same arguments (hosts: 2, devices: 1 each; fixtures/fit-host.ts) and both end with what one process's fit on 2
// devices gives — the History, epoch by epoch (relative 1e-4): the training logs added up over the hosts' shares of
// each batch (a partial last batch included), val_loss and val_ metrics over the hosts' parts of the validation
// batches; and the final weights (1e-4), BatchNormalization's moving statistics included — which is tfjs's own
// model.fit too. tf.callbacks.earlyStopping stops both hosts at the epoch it stops one process at; a callback on host
// 1 alone that stops the fit stops host 0 after the same epoch; hosts called with different arguments both refuse,
// naming the argument and the hosts (another loss function too). A model of two outputs (y a Tensor[]) across the
// hosts equals one process too.
// Every process is torn down.
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { freePort } from '../src/world/launch.js';
import { fit } from '../src/index.js';
import { beforeFit, hostsArgs, hostsFit, type HostsMode } from './fixtures/fit-hosts-case.js';

const HOST = fileURLToPath(new URL('./fixtures/fit-host.js', import.meta.url));

interface HostResult {
  epoch?: number[];
  history?: Record<string, number[]>;
  weights?: number[][];
  error?: { name: string; code?: string; message: string };
}

const live = new Set<ChildProcess>();
t.teardown(() => {
  for (const c of live) c.kill('SIGKILL');
});

/** One host's fit to its end: its JSON line (its other output kept for a failure's message). */
async function host(rank: number, rendezvous: string, mode: HostsMode): Promise<HostResult> {
  const child = spawn(process.execPath, [HOST, String(rank), rendezvous, mode], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const lines: string[] = [];
  for (const stream of [child.stdout!, child.stderr!])
    readline.createInterface({ input: stream }).on('line', l => lines.push(l));
  await once(child, 'close');
  live.delete(child);
  const json = lines.find(l => l.startsWith('{"epoch"') || l.startsWith('{"error"'));
  if (!json) throw new Error(`host ${rank} printed no result:\n${lines.join('\n')}`);
  return JSON.parse(json) as HostResult;
}

async function twoHosts(mode: HostsMode): Promise<HostResult[]> {
  const rendezvous = `127.0.0.1:${await freePort()}`;
  return Promise.all([host(0, rendezvous, mode), host(1, rendezvous, mode)]);
}

/** One process's fit of `mode` on 2 devices (host 0's arguments), or tfjs's own model.fit. */
async function oneProcess(mode: HostsMode, tfjs = false): Promise<HostResult> {
  const { model, x, y } = hostsFit(mode);
  await beforeFit(mode, 0, { model, x, y });
  const args = hostsArgs(mode, 0, () => model);
  const h = tfjs ? await model.fit(x, y, args) : await fit(model, x, y, { ...args, devices: 2, backend: 'cpu' });
  const weights = model.getWeights().map(w => Array.from(w.dataSync()));
  tf.dispose([x, y]);
  model.dispose();
  return { epoch: h.epoch, history: h.history as Record<string, number[]>, weights };
}

const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-6);

function sameRun(t: Test, got: HostResult, want: HostResult, what: string): void {
  t.notOk(got.error, `${what}: no error${got.error ? ` (${got.error.message})` : ''}`);
  t.same(got.epoch, want.epoch, `${what}: the same epochs`);
  t.same(Object.keys(got.history!).sort(), Object.keys(want.history!).sort(), `${what}: the same History keys`);
  let worst = 0;
  for (const [key, values] of Object.entries(want.history!))
    values.forEach((v, e) => (worst = Math.max(worst, relative(got.history![key][e], v))));
  t.ok(worst < 1e-4, `${what}: every History value within relative 1e-4 (worst ${worst.toExponential(2)})`);
  let far = 0;
  want.weights!.forEach((w, k) => w.forEach((v, i) => (far = Math.max(far, Math.abs(got.weights![k][i] - v)))));
  t.ok(far < 1e-4, `${what}: the final weights within 1e-4 (worst ${far.toExponential(2)})`);
}

await tf.setBackend('cpu');

t.test('2 hosts × 1 device = one process with 2 devices = model.fit', async t => {
  if (!glooAddonOrSkip()) return;
  const [h0, h1] = await twoHosts('plain');
  const reference = await oneProcess('plain');
  t.same(Object.keys(reference.history!).sort(), ['acc', 'loss', 'mse', 'val_acc', 'val_loss', 'val_mse']);
  sameRun(t, h0, reference, 'host 0');
  sameRun(t, h1, reference, 'host 1');
  t.same(h1.history, h0.history, "every host's History is the same, bit for bit");
  sameRun(t, reference, await oneProcess('plain', true), "one process (against tfjs's model.fit)");
});

t.test("after tfjs's model.fit on every host, fit goes on from the optimizer's state as in one process", async t => {
  if (!glooAddonOrSkip()) return;
  const [h0, h1] = await twoHosts('after-model-fit');
  const reference = await oneProcess('after-model-fit');
  sameRun(t, h0, reference, 'host 0');
  sameRun(t, h1, reference, 'host 1');
  sameRun(t, reference, await oneProcess('after-model-fit', true), "one process (against tfjs's model.fit)");
  const iterations = await twoHosts('other-iterations');
  for (const [rank, r] of iterations.entries()) {
    t.equal(r.error?.code, 'BAD_CONFIG', `host ${rank} refuses a host whose optimizer trained more`);
    t.match(r.error?.message, /host 1 was called with other arguments than host 0 — the model: sha256:\w+ on host 0/);
  }
});

t.test('a learning-rate schedule, and validation data of fewer batches than hosts', async t => {
  if (!glooAddonOrSkip()) return;
  const [h0, h1] = await twoHosts('schedule');
  const reference = await oneProcess('schedule');
  t.same(Object.keys(reference.history!).sort(), ['acc', 'loss', 'lr', 'mse', 'val_acc', 'val_loss', 'val_mse']);
  sameRun(t, h0, reference, 'host 0');
  sameRun(t, h1, reference, 'host 1');
});

t.test('tf.callbacks.earlyStopping stops both hosts where it stops one process', async t => {
  if (!glooAddonOrSkip()) return;
  const [h0, h1] = await twoHosts('early-stopping');
  const reference = await oneProcess('early-stopping');
  t.same(reference.epoch, [0, 1, 2, 3], 'one process: stopped after epoch 3 of 6');
  sameRun(t, h0, reference, 'host 0');
  sameRun(t, h1, reference, 'host 1');
});

t.test('a callback of host 1 alone that stops the fit stops host 0 after the same epoch', async t => {
  if (!glooAddonOrSkip()) return;
  const [h0, h1] = await twoHosts('host1-stops');
  t.notOk(h0.error ?? h1.error, 'both fits end');
  t.same(h1.epoch, [0, 1], 'host 1 stopped after epoch 1 of 5');
  t.same(h0.epoch, [0, 1], 'and so did host 0');
  t.same(h0.weights, h1.weights, 'with the same weights');
});

t.test('a model of two outputs (y a Tensor[]) across 2 hosts = one process with 2 devices', async t => {
  if (!glooAddonOrSkip()) return;
  const [h0, h1] = await twoHosts('outputs');
  const reference = await oneProcess('outputs');
  const keys = ['loss', 'cls_loss', 'reg_loss', 'cls_acc', 'reg_acc'];
  t.same(Object.keys(reference.history!).sort(), [...keys, ...keys.map(k => `val_${k}`)].sort(), "tfjs's keys");
  sameRun(t, h0, reference, 'host 0');
  sameRun(t, h1, reference, 'host 1');
  t.same(h1.history, h0.history, "every host's History is the same, bit for bit");
});

t.test('hosts called with different arguments both refuse, naming the argument and the hosts', async t => {
  if (!glooAddonOrSkip()) return;
  const results = await twoHosts('other-epochs');
  for (const [rank, r] of results.entries()) {
    t.equal(r.error?.code, 'BAD_CONFIG', `host ${rank} refuses`);
    t.match(r.error?.message, /host 1 was called with other arguments than host 0 — epochs: 3 on host 0, 4 on host 1/);
  }
  // a loss function is each host's own: its source is part of the model's compile settings the hosts compare
  const losses = await twoHosts('other-loss');
  for (const [rank, r] of losses.entries()) {
    t.equal(r.error?.code, 'BAD_CONFIG', `host ${rank} refuses another loss function`);
    t.match(r.error?.message, /host 1 was called with other arguments than host 0 — the model: sha256:\w+ on host 0/);
  }
});
