// One host of the hosts all-reduce benchmark (`npm run bench -- hosts-allreduce`), in its own process: prepares the
// gradient-like communicator of its devices on the transport named in argv (its world's store served by
// the driver), one worker thread per device all-reduces (mean) its registered slot `repeats` times, and the
// host prints one JSON line: the slowest device's milliseconds per all-reduce.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { getTransport, openCollective } from '../src/collectives/transport-registry.js';
import type { RankHandle, SlotBuffer } from '../src/collectives/transport.js';

interface HostJob {
  transport: string;
  host: number;
  hosts: number;
  local: number;
  store: string;
  key: string;
  floats: number;
  repeats: number;
}
interface DeviceJob {
  handle: RankHandle;
  slots: SlotBuffer;
  local: number;
  repeats: number;
}

async function host(job: HostJob): Promise<void> {
  const slots: SlotBuffer = {
    buffer: new SharedArrayBuffer(job.local * job.floats * 4),
    slotFloats: job.floats,
    slots: job.local,
  };
  new Float32Array(slots.buffer).forEach((_, i, a) => {
    a[i] = Math.sin(i * 0.37 + job.host);
  });
  const prepared = await getTransport(job.transport).prepare({
    name: 'bench',
    size: job.local,
    registered: [slots],
    stagingFloats: 1 << 16,
    options: { allReduce: 'sharded' },
    world: {
      store: job.store,
      rankOffset: job.host * job.local,
      worldSize: job.hosts * job.local,
      hostname: '127.0.0.1',
      ranksPerProcess: job.local,
      key: job.key,
    },
  });
  const times = await Promise.all(
    prepared.handles.map(
      (handle, local) =>
        new Promise<number>((resolve, reject) => {
          const w = new Worker(new URL(import.meta.url), {
            workerData: { handle, slots, local, repeats: job.repeats } satisfies DeviceJob,
          });
          w.once('message', resolve);
          w.once('error', reject);
        }),
    ),
  );
  process.stdout.write(`${JSON.stringify({ host: job.host, msPerAllReduce: Math.max(...times) })}\n`);
}

async function device({ handle, slots, local, repeats }: DeviceJob): Promise<void> {
  const c = openCollective(handle, { timeoutMs: 120_000, isAborted: () => false });
  const mine = new Float32Array(slots.buffer, local * slots.slotFloats * 4, slots.slotFloats);
  await c.allReduce(mine, 0, mine.length, 'mean'); // warm-up (and connections)
  await c.barrier();
  const t0 = performance.now();
  for (let i = 0; i < repeats; i++) await c.allReduce(mine, 0, mine.length, 'mean');
  const ms = (performance.now() - t0) / repeats;
  c.close();
  parentPort!.postMessage(ms);
}

if (isMainThread) await host(JSON.parse(process.argv[2]) as HostJob);
else await device(workerData as DeviceJob);
