/**
 * Worker entry of a device's compute thread: the only file of the compute
 * side that touches `parentPort`. It loads the run's plugins, keeps one
 * `DeviceReplica` and forwards each request to it. Every failure goes back
 * as data with device, step and phase; the main thread rethrows it with that
 * context and its code.
 */
import { parentPort } from 'node:worker_threads';
import { serializeError } from '../errors.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { DeviceReplica } from './device-replica.js';
import type { FromCompute, ToCompute } from './protocol.js';
import { nameThisThread } from '../engine/thread-name.js';

if (!parentPort) throw new Error('compute-worker must run as a worker thread');
const port = parentPort;

let replica: DeviceReplica | undefined;
let identity = { device: -1, step: 0, phase: 'setup' as const };

function send(msg: FromCompute, transfer: ArrayBuffer[] = []): void {
  port.postMessage(msg, transfer);
}

// One request at a time, in arrival order (a request never overtakes the one before it).
let queue = Promise.resolve();
port.on('message', (msg: ToCompute) => {
  queue = queue
    .then(() => handle(msg))
    .catch(err => {
      send({ type: 'error', ...(replica?.where ?? identity), error: serializeError(err) });
    });
});

async function handle(msg: ToCompute): Promise<void> {
  switch (msg.type) {
    case 'init':
      identity = { ...identity, device: msg.device.rank };
      nameThisThread('compute', msg.device.rank);
      await loadPlugins(msg.config.plugins);
      replica = new DeviceReplica(msg.device, msg.config, msg.control, msg.groupCount, send);
      return replica.build();
    case 'buffers':
      return need().attach(msg.buffers, msg.groups, msg.collective);
    case 'step':
      return need().trainStep(msg.step);
    case 'finish':
      return need().finish(msg.lastStep, msg.exportModel);
    case 'snapshotHead':
      return need().snapshot(msg.step);
    case 'restoreHead':
      return need().restore(msg.head);
    default: {
      const never: never = msg;
      throw new Error(`unknown message ${JSON.stringify(never)}`);
    }
  }
}

function need(): DeviceReplica {
  if (!replica) throw new Error('the compute thread was sent work before init');
  return replica;
}
