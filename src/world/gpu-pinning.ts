/**
 * One process per GPU: the environment that pins GPU process k of a machine
 * to its GPU before Dawn (or any Vulkan code) starts in it. Dawn picks an
 * adapter only by a substring of its name, and Mesa's device-select layer
 * reads its variables once per process, so identical GPUs are told apart only
 * by giving each process its own environment:
 *
 * - every vendor, through Mesa's device-select layer (VK_LAYER_MESA_device_select,
 *   an implicit layer of mesa-vulkan-drivers that filters every driver's
 *   devices, NVIDIA's included): `DRI_PRIME=pci-DDDD_BB_DD_F` selects the GPU by
 *   its PCI address, `MESA_VK_DEVICE_SELECT_FORCE_DEFAULT_DEVICE=1` hides the
 *   others; `MESA_VK_DEVICE_SELECT=vendor:device` only where that id is unique on
 *   the machine (it is read before DRI_PRIME and would pick the first of
 *   identical GPUs);
 * - NVIDIA, in addition: `CUDA_DEVICE_ORDER=PCI_BUS_ID` and
 *   `CUDA_VISIBLE_DEVICES=<uuid>` (honoured by CUDA, not reliably by the Vulkan
 *   driver: the device-select layer does the Vulkan part);
 * - the software driver (llvmpipe): one "GPU" shared by every process, each
 *   with `LP_NUM_THREADS` = its share of the cores.
 *
 * And tandem's own variables, read by the webgpu engine when it starts:
 * `TANDEM_GPU_INDEX` (k), `TANDEM_GPU` (the GPU in words) and
 * `TANDEM_WEBGPU_ADAPTER` (the substring for Dawn's `adapter=` option).
 */
import { TandemError } from '../errors.js';
import { hex4, type GpuInventory, type PciGpu } from './gpu-inventory.js';

/** The environment variables tandem sets for a GPU process and the webgpu engine reads. */
export const GPU_ENV = { index: 'TANDEM_GPU_INDEX', gpu: 'TANDEM_GPU', adapter: 'TANDEM_WEBGPU_ADAPTER' } as const;

/** Every variable a pin may set: cleared from the launcher's environment before a process's own are added. */
export const PINNING_VARIABLES = [
  GPU_ENV.index,
  GPU_ENV.gpu,
  GPU_ENV.adapter,
  'DRI_PRIME',
  'MESA_VK_DEVICE_SELECT',
  'MESA_VK_DEVICE_SELECT_FORCE_DEFAULT_DEVICE',
  'CUDA_DEVICE_ORDER',
  'CUDA_VISIBLE_DEVICES',
  'LP_NUM_THREADS',
] as const;

/** What one GPU process is told. */
export interface GpuPin {
  /** Its GPU in words, e.g. `0000:03:00.0 (10de:2335 NVIDIA H200)` or `llvmpipe (software Vulkan, shared)`. */
  gpu: string;
  /** The substring Dawn's `create(['adapter=…'])` is given. */
  adapter: string;
  env: Record<string, string>;
}

/** The pins of `count` GPU processes on this machine, and what the launcher should say about them. */
export interface GpuPlan {
  pins: GpuPin[];
  notes: string[];
}

export interface PlanOptions {
  /** The machine's CPU cores (llvmpipe's threads are shared out among the processes). */
  cpus: number;
  /**
   * Whether Mesa's device-select layer is installed (without it the Vulkan part of the pinning is left to the driver).
   */
  deviceSelectLayer: boolean;
}

/** The pins of GPU processes 0..count-1 (see the file's comment); more processes than GPUs is refused on real GPUs. */
export function planGpus(inventory: GpuInventory, count: number, options: PlanOptions): GpuPlan {
  switch (inventory.kind) {
    case 'software': {
      const threads = Math.max(1, Math.floor(options.cpus / count));
      const shared = count > 1 ? `, shared by ${count} processes` : '';
      const pins = Array.from({ length: count }, (_, k) =>
        pin(k, `llvmpipe (software Vulkan${shared})`, 'llvmpipe', { LP_NUM_THREADS: String(threads) }),
      );
      const notes = [
        `no NVIDIA, AMD or Intel GPU found: the GPU processes are pinned to the software Vulkan driver (llvmpipe; ` +
          `what --backend webgpu runs on)` +
          (count > 1
            ? `, ${count} processes sharing it (${threads} llvmpipe thread(s) each): a correctness rig, not a speed ` +
              `measurement`
            : ''),
      ];
      return { pins, notes };
    }
    case 'hardware': {
      const { gpus } = inventory;
      if (count > gpus.length) {
        throw new TandemError(
          'BAD_CONFIG',
          `--gpus ${count}: this machine has ${gpus.length} GPU(s): ${gpus.map(describe).join(', ')}; ` +
            `give --gpus ${gpus.length} or fewer (one process per GPU)`,
        );
      }
      const notes =
        options.deviceSelectLayer || count === 1
          ? []
          : [
              `Mesa's Vulkan device-select layer (VK_LAYER_MESA_device_select, ` +
                (`package mesa-vulkan-drivers) is not installed: every GPU process may see every GPU and Dawn pick ` +
                  `the same one; install it to pin by PCI address`),
            ];
      return {
        pins: gpus.slice(0, count).map((g, k) => pin(k, describe(g), adapterName(g), hardwareEnv(g, gpus))),
        notes,
      };
    }
    default: {
      const never: never = inventory;
      throw new Error(`unknown inventory ${JSON.stringify(never)}`);
    }
  }
}

/** The GPU in words. */
export function describe(g: PciGpu): string {
  return `${g.pciAddress} (${hex4(g.vendorId)}:${hex4(g.deviceId)} ${g.name ?? g.vendor})`;
}

function pin(k: number, gpu: string, adapter: string, env: Record<string, string>): GpuPin {
  return { gpu, adapter, env: { [GPU_ENV.index]: String(k), [GPU_ENV.gpu]: gpu, [GPU_ENV.adapter]: adapter, ...env } };
}

/** The vendor's part of its Vulkan device names (NVIDIA H200, AMD Radeon … (RADV …), Intel(R) Arc …). */
function adapterName(g: PciGpu): string {
  switch (g.vendor) {
    case 'nvidia':
      return 'NVIDIA';
    case 'amd':
      return 'AMD';
    case 'intel':
      return 'Intel';
    default: {
      const never: never = g.vendor;
      throw new Error(`unknown vendor ${String(never)}`);
    }
  }
}

function hardwareEnv(g: PciGpu, all: PciGpu[]): Record<string, string> {
  const [domain, bus, devFn] = g.pciAddress.split(':');
  const [device, fn] = devFn.split('.');
  const env: Record<string, string> = {
    DRI_PRIME: `pci-${domain}_${bus}_${device}_${fn}`,
    MESA_VK_DEVICE_SELECT_FORCE_DEFAULT_DEVICE: '1',
  };
  const sameId = all.filter(o => o.vendorId === g.vendorId && o.deviceId === g.deviceId);
  if (sameId.length === 1) env.MESA_VK_DEVICE_SELECT = `${hex4(g.vendorId)}:${hex4(g.deviceId)}`;
  if (g.vendor === 'nvidia') {
    env.CUDA_DEVICE_ORDER = 'PCI_BUS_ID';
    env.CUDA_VISIBLE_DEVICES = g.uuid ?? String(all.filter(o => o.vendor === 'nvidia').indexOf(g));
  }
  return env;
}
