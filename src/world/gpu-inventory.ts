/**
 * The GPUs of this machine, for `tandem launch --gpus N`: the PCI display and
 * 3D controllers of NVIDIA, AMD and Intel under /sys/bus/pci/devices (class
 * 0x03xxxx; a server's BMC VGA or a VM's emulated one is of another vendor and
 * is left out), in PCI address order, named by `nvidia-smi` where it runs.
 * No such GPU: the machine's one "GPU" is the software Vulkan driver
 * (Mesa's llvmpipe), which several processes may share.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

export type GpuVendor = 'nvidia' | 'amd' | 'intel';

/** A GPU on the PCI bus. */
export interface PciGpu {
  vendor: GpuVendor;
  /** `domain:bus:device.function`, e.g. `0000:03:00.0`. */
  pciAddress: string;
  vendorId: number;
  deviceId: number;
  /** From nvidia-smi (NVIDIA only), e.g. `NVIDIA H200`. */
  name?: string;
  /**
   * From nvidia-smi (NVIDIA only), e.g. `GPU-5c1e…`: what CUDA_VISIBLE_DEVICES accepts whatever the enumeration order.
   */
  uuid?: string;
}

/** What `--gpus` can pin to. */
export type GpuInventory =
  { kind: 'hardware'; gpus: PciGpu[]; ignored: string[] } | { kind: 'software'; ignored: string[] };

const VENDORS: Readonly<Record<number, GpuVendor>> = { 0x10de: 'nvidia', 0x1002: 'amd', 0x8086: 'intel' };

export interface FindGpusOptions {
  /** Where sysfs is mounted (tests give a directory of fake devices). */
  sysRoot?: string;
  /**
   * `nvidia-smi --query-gpu=pci.bus_id,uuid,name --format=csv,noheader`'s output, or undefined where it does not run.
   */
  nvidiaSmi?: () => string | undefined;
}

/** This machine's GPUs (see the file's comment). */
export function findGpus(options: FindGpusOptions = {}): GpuInventory {
  const root = path.join(options.sysRoot ?? '/sys', 'bus', 'pci', 'devices');
  const gpus: PciGpu[] = [];
  const ignored: string[] = [];
  for (const address of listDir(root).sort()) {
    const read = (file: string) => parseInt(readText(path.join(root, address, file)) ?? '', 16);
    const pciClass = read('class');
    if (!Number.isInteger(pciClass) || pciClass >> 16 !== 0x03) continue; // not a display or 3D controller
    const vendorId = read('vendor'),
      deviceId = read('device');
    const vendor = VENDORS[vendorId];
    if (vendor) gpus.push({ vendor, pciAddress: address.toLowerCase(), vendorId, deviceId });
    else ignored.push(`${address} (${hex4(vendorId)}:${hex4(deviceId)}: not an NVIDIA, AMD or Intel GPU)`);
  }
  if (gpus.length === 0) return { kind: 'software', ignored };
  if (gpus.some(g => g.vendor === 'nvidia')) nameNvidia(gpus, (options.nvidiaSmi ?? runNvidiaSmi)());
  return { kind: 'hardware', gpus, ignored };
}

/** nvidia-smi's CSV lines (`00000000:03:00.0, GPU-…, NVIDIA H200`) by PCI address (`0000:03:00.0`). */
export function parseNvidiaSmi(text: string): Map<string, { uuid: string; name: string }> {
  const out = new Map<string, { uuid: string; name: string }>();
  for (const line of text.split('\n')) {
    const [bus, uuid, ...name] = line.split(',').map(s => s.trim());
    const m = /^([0-9a-f]+):([0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f])$/i.exec(bus ?? '');
    if (!m || !uuid) continue;
    out.set(`${m[1].slice(-4)}:${m[2]}`.toLowerCase(), { uuid, name: name.join(',') });
  }
  return out;
}

/** `vvvv:dddd` in hex, as lspci and MESA_VK_DEVICE_SELECT write a PCI id. */
export function hex4(n: number): string {
  return Number.isInteger(n) ? n.toString(16).padStart(4, '0') : '????';
}

function nameNvidia(gpus: PciGpu[], smi: string | undefined): void {
  if (smi === undefined) return;
  const named = parseNvidiaSmi(smi);
  for (const g of gpus) {
    const n = named.get(g.pciAddress);
    if (n) {
      g.uuid = n.uuid;
      g.name = n.name;
    }
  }
}

function runNvidiaSmi(): string | undefined {
  const r = spawnSync('nvidia-smi', ['--query-gpu=pci.bus_id,uuid,name', '--format=csv,noheader'], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  return r.status === 0 ? r.stdout : undefined;
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Where the Vulkan loader looks for implicit layers (XDG data dirs, /etc). */
const IMPLICIT_LAYER_DIRS = [
  '/usr/share/vulkan/implicit_layer.d',
  '/usr/local/share/vulkan/implicit_layer.d',
  '/etc/vulkan/implicit_layer.d',
];

/** Whether Mesa's device-select layer (VK_LAYER_MESA_device_select) is installed where the Vulkan loader finds it. */
export function hasMesaDeviceSelect(dirs: readonly string[] = IMPLICIT_LAYER_DIRS): boolean {
  return dirs.some(d => listDir(d).some(f => /MESA_device_select/i.test(f)));
}
