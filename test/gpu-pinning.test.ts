// The GPUs of a machine and the environment that pins each GPU process to one, on fake sysfs trees (real files in a
// temporary directory, read by the same code as /sys): NVIDIA, AMD and Intel display/3D controllers are GPUs, a BMC's
// VGA
// and a network card are not; identical GPUs are told apart by PCI address (DRI_PRIME=pci-…), never by vendor:device;
// nvidia-smi's names and UUIDs are matched by PCI address; more processes than GPUs is refused naming them; no GPU:
// every process shares llvmpipe with its share of the cores.
import t, { type Test } from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findGpus, hasMesaDeviceSelect, parseNvidiaSmi, type GpuInventory } from '../src/world/gpu-inventory.js';
import { GPU_ENV, planGpus } from '../src/world/gpu-pinning.js';
import { launchHosts } from '../src/world/launch.js';

type FakeDevice = { address: string; pciClass: string; vendor: string; device: string };

/** A sysfs tree with `devices` under bus/pci/devices, removed at the test's end. */
function fakeSys(t: Test, devices: FakeDevice[]): string {
  const root = mkdtempSync(path.join(tmpdir(), 'tandem-sysfs-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const d of devices) {
    const dir = path.join(root, 'bus', 'pci', 'devices', d.address);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'class'), `${d.pciClass}\n`);
    writeFileSync(path.join(dir, 'vendor'), `${d.vendor}\n`);
    writeFileSync(path.join(dir, 'device'), `${d.device}\n`);
  }
  return root;
}

const H200 = (address: string): FakeDevice => ({ address, pciClass: '0x030200', vendor: '0x10de', device: '0x2335' });
const BMC_VGA: FakeDevice = { address: '0000:02:00.0', pciClass: '0x030000', vendor: '0x1a03', device: '0x2000' };
const NIC: FakeDevice = { address: '0000:05:00.0', pciClass: '0x020000', vendor: '0x15b3', device: '0x1021' };
const SMI = '00000000:C3:00.0, GPU-bbbb, NVIDIA H200\n00000000:04:00.0, GPU-aaaa, NVIDIA H200\n';
const OPTIONS = { cpus: 8, deviceSelectLayer: true };

t.test('two identical NVIDIA GPUs (and a BMC VGA, a NIC): pinned by PCI address and UUID, in PCI order', async t => {
  const sysRoot = fakeSys(t, [H200('0000:c3:00.0'), BMC_VGA, NIC, H200('0000:04:00.0')]);
  const inventory = findGpus({ sysRoot, nvidiaSmi: () => SMI });
  if (inventory.kind !== 'hardware') throw new Error(`expected hardware, got ${JSON.stringify(inventory)}`);
  t.same(
    inventory.gpus.map(g => [g.pciAddress, g.vendor, g.uuid, g.name]),
    [
      ['0000:04:00.0', 'nvidia', 'GPU-aaaa', 'NVIDIA H200'],
      ['0000:c3:00.0', 'nvidia', 'GPU-bbbb', 'NVIDIA H200'],
    ],
  );
  t.match(
    inventory.ignored,
    [/0000:02:00\.0 \(1a03:2000/],
    'the BMC VGA is named as ignored; the NIC is not a display device',
  );
  const { pins, notes } = planGpus(inventory, 2, OPTIONS);
  t.same(notes, []);
  t.same(
    pins[0].env,
    {
      [GPU_ENV.index]: '0',
      [GPU_ENV.gpu]: '0000:04:00.0 (10de:2335 NVIDIA H200)',
      [GPU_ENV.adapter]: 'NVIDIA',
      DRI_PRIME: 'pci-0000_04_00_0',
      MESA_VK_DEVICE_SELECT_FORCE_DEFAULT_DEVICE: '1',
      CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
      CUDA_VISIBLE_DEVICES: 'GPU-aaaa',
    },
    'GPU process 0: no MESA_VK_DEVICE_SELECT (10de:2335 names both GPUs: it would pick the first for every process)',
  );
  t.same(
    [pins[1].env.DRI_PRIME, pins[1].env.CUDA_VISIBLE_DEVICES, pins[1].env[GPU_ENV.index]],
    ['pci-0000_c3_00_0', 'GPU-bbbb', '1'],
  );
  t.throws(() => planGpus(inventory, 3, OPTIONS), {
    code: 'BAD_CONFIG',
    message: /--gpus 3: this machine has 2 GPU\(s\): 0000:04:00\.0 .*, 0000:c3:00\.0 .*give --gpus 2 or fewer/,
  });
  t.match(
    planGpus(inventory, 2, { ...OPTIONS, deviceSelectLayer: false }).notes,
    [/device-select layer .* not installed/],
    "without Mesa's layer the launcher says so",
  );
  t.same(planGpus(inventory, 1, OPTIONS).pins.length, 1, 'fewer processes than GPUs: the first GPUs');
});

t.test('no nvidia-smi: NVIDIA GPUs counted from sysfs, CUDA_VISIBLE_DEVICES by index in PCI order', async t => {
  const sysRoot = fakeSys(t, [H200('0000:04:00.0'), H200('0000:c3:00.0')]);
  const { pins } = planGpus(findGpus({ sysRoot, nvidiaSmi: () => undefined }), 2, OPTIONS);
  t.same(
    pins.map(p => [p.env.CUDA_VISIBLE_DEVICES, p.adapter, p.gpu]),
    [
      ['0', 'NVIDIA', '0000:04:00.0 (10de:2335 nvidia)'],
      ['1', 'NVIDIA', '0000:c3:00.0 (10de:2335 nvidia)'],
    ],
  );
});

t.test('an AMD and an Intel GPU: unique ids, so MESA_VK_DEVICE_SELECT too; no CUDA variables', async t => {
  const sysRoot = fakeSys(t, [
    { address: '0000:00:02.0', pciClass: '0x030000', vendor: '0x8086', device: '0xa780' },
    { address: '0000:03:00.0', pciClass: '0x030000', vendor: '0x1002', device: '0x744c' },
  ]);
  const { pins } = planGpus(
    findGpus({
      sysRoot,
      nvidiaSmi: () => {
        throw new Error('nvidia-smi asked without an NVIDIA GPU');
      },
    }),
    2,
    OPTIONS,
  );
  t.same(
    pins.map(p => [p.adapter, p.env.MESA_VK_DEVICE_SELECT, p.env.DRI_PRIME, p.env.CUDA_VISIBLE_DEVICES]),
    [
      ['Intel', '8086:a780', 'pci-0000_00_02_0', undefined],
      ['AMD', '1002:744c', 'pci-0000_03_00_0', undefined],
    ],
  );
});

t.test(
  'no GPU (only a BMC VGA, or no sysfs at all): N processes share llvmpipe, each with its share of the cores',
  async t => {
    for (const sysRoot of [fakeSys(t, [BMC_VGA, NIC]), path.join(tmpdir(), 'tandem-no-such-sysfs')]) {
      const inventory: GpuInventory = findGpus({ sysRoot, nvidiaSmi: () => undefined });
      t.equal(inventory.kind, 'software');
      const { pins, notes } = planGpus(inventory, 3, { cpus: 8, deviceSelectLayer: false });
      t.same(
        pins.map(p => [p.env[GPU_ENV.index], p.adapter, p.env.LP_NUM_THREADS, p.env.DRI_PRIME]),
        [
          ['0', 'llvmpipe', '2', undefined],
          ['1', 'llvmpipe', '2', undefined],
          ['2', 'llvmpipe', '2', undefined],
        ],
      );
      t.match(notes, [/software Vulkan driver \(llvmpipe; .*\), 3 processes sharing it/]);
    }
  },
);

t.test(
  "nvidia-smi CSV: 8-digit PCI domains to sysfs's 4, odd lines skipped; the device-select layer found by its manifest",
  async t => {
    t.same(
      [...parseNvidiaSmi('00000000:0A:00.0, GPU-1, NVIDIA A100-SXM4-80GB\nNo devices were found\n\n').entries()],
      [['0000:0a:00.0', { uuid: 'GPU-1', name: 'NVIDIA A100-SXM4-80GB' }]],
    );
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-layers-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    t.equal(hasMesaDeviceSelect([dir]), false);
    writeFileSync(path.join(dir, 'VkLayer_MESA_device_select.json'), '{}');
    t.equal(hasMesaDeviceSelect([path.join(dir, 'missing'), dir]), true);
  },
);

t.test(
  'tandem launch --gpus 3 on a machine with 2 GPUs: refused before any process starts, naming the GPUs',
  async t => {
    const sysRoot = fakeSys(t, [H200('0000:04:00.0'), H200('0000:c3:00.0')]);
    const machine = { gpus: () => findGpus({ sysRoot, nvidiaSmi: () => SMI }), cpus: 8, deviceSelectLayer: true };
    const lines: string[] = [];
    await t.rejects(
      launchHosts(
        ['--gpus', '3', '--model', 'mlp'],
        (prefix, l) => lines.push(`[${prefix}] ${l.text}`),
        l => lines.push(l),
        async () => {},
        machine,
      ),
      { code: 'BAD_CONFIG', message: /--gpus 3: this machine has 2 GPU\(s\)/ },
    );
    t.same(lines, [], 'nothing started, nothing said');
  },
);
