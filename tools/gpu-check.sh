#!/usr/bin/env bash
# tandem's GPU check, from the bundle `npm run gpu-bundle` writes (docs/guide/gpu.md). On a bare x86-64 machine, no
# network, no Node.js: unpacks node and tandem next to nothing of the machine's but libc, finds a Vulkan loader (the
# machine's, else Debian's libvulkan1 from the bundle) and NVIDIA's ICD, lists the adapters Dawn sees and stops at
# once when only a software one is there (unless --accept-software), then, within --budget seconds in all (420):
# correctness (alexnet-mini and resnet-mini on 1 and 2 webgpu devices against the cpu engine, within 1e-4; with several
# GPUs `tandem launch --gpus N` against one process), samples/s on 1 and 2 devices of one GPU with the step's split,
# `bench gpu` (1 and N GPU processes, traces and their PNGs), and PyTorch on the same GPU (fp32, bf16 autocast) where
# `python3 -c 'import torch'` works. Writes at most 8 files to --out (default $OUT, else ./gpu-check-out) and a
# one-screen summary to stdout. Never calls npm, never reaches the network, never runs a `node` from PATH.
#
#   bash gpu-bundle/gpu-check.sh [--accept-software] [--budget SECONDS] [--out DIR] [--work DIR] [--keep]
#
# Exit status: 0 all ran and agreed; 2 no usable adapter; 3 only a software adapter (without --accept-software);
# 1 a check failed or ran out of time. TANDEM_GPU_CHECK_LOADER=bundled uses the bundle's loader even where the
# machine has one (the CI test does, to exercise it).
set -uo pipefail
start=$(date +%s)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
accept_software=0 budget=420 out="${OUT:-$PWD/gpu-check-out}" work='' keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --accept-software) accept_software=1 ;;
    --budget) budget="$2"; shift ;;
    --out) out="$2"; shift ;;
    --work) work="$2"; shift ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
  shift
done
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
log="$out/check.log"
: >"$log"
if [ -z "$work" ]; then work=$(mktemp -d "${TMPDIR:-/tmp}/tandem-gpu-check.XXXXXX"); else mkdir -p "$work"; fi
work=$(cd "$work" && pwd)
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
failed=0
say() { echo "gpu-check: $*"; echo "gpu-check: $*" >>"$log"; }
elapsed() { echo $(( $(date +%s) - start )); }
left() { echo $(( budget - $(elapsed) )); }
die() { local code=$1; shift; say "FAILED: $*"; say "log: $log"; exit "$code"; }

# Decompresses $1 (xz) to $2: xz where the machine has it, else Python's lzma.
unxz_to() {
  if command -v xz >/dev/null; then xz -dc "$1" >"$2"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
  fi
}

# --- unpack -------------------------------------------------------------------------------------------------------
say "unpacking $here into $work"
unxz_to "$here/node.xz" "$work/node" && chmod +x "$work/node" || die 1 "could not unpack node.xz"
mkdir -p "$work/app"
{ unxz_to "$here/tandem.tar.xz" "$work/tandem.tar" && tar -xf "$work/tandem.tar" -C "$work/app" && rm "$work/tandem.tar"; } \
  || die 1 "could not unpack tandem.tar.xz"
NODE="$work/node"
CHECK="$work/app/dist/bench/gpu-check.js"
"$NODE" --version >>"$log" 2>&1 || die 1 "the bundled node does not run here ($(uname -m)): $(tail -1 "$log")"
say "node $("$NODE" --version) from the bundle ($(( $(elapsed) )) s)"

# --- Vulkan loader and ICD ----------------------------------------------------------------------------------------
if [ "${TANDEM_GPU_CHECK_LOADER:-}" != bundled ] && ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 '; then
  say "Vulkan loader: the machine's ($(ldconfig -p | grep -m1 'libvulkan\.so\.1 ' | sed 's/.*=> //'))"
else
  mkdir -p "$work/sysroot"
  for deb in "$here"/debs/*.deb; do
    if command -v dpkg >/dev/null; then dpkg -x "$deb" "$work/sysroot"
    else (cd "$work/sysroot" && ar p "$deb" "$(ar t "$deb" | grep '^data\.tar')" | tar -xJ); fi || die 1 "could not unpack $deb"
  done
  lib="$work/sysroot/usr/lib/x86_64-linux-gnu"
  [ -e "$lib/libvulkan.so.1" ] || die 1 "the bundle's libvulkan1 gave no $lib/libvulkan.so.1"
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "Vulkan loader: the bundle's ($(ls "$here"/debs | tr '\n' ' '))"
fi
if [ -z "${VK_DRIVER_FILES:-}" ]; then
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd*.json /usr/share/vulkan/icd.d/nvidia_icd*.json \
      /etc/vulkan/icd.d/nvidia_icd*.json /usr/local/share/vulkan/icd.d/nvidia_icd*.json; do
    if [ -f "$icd" ]; then export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"; break; fi
  done
fi
if [ -n "${VK_DRIVER_FILES:-}" ]; then
  say "Vulkan driver: VK_DRIVER_FILES=$VK_DRIVER_FILES"
  # The ICD names libGLX_nvidia.so.0 without a folder: where the driver's mount is not in ld.so.conf, look there too.
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
  done
  [ -d /usr/local/nvidia/share/glvnd/egl_vendor.d ] && \
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
else
  say "Vulkan driver: no NVIDIA ICD found; the loader's default search ($(ls /usr/share/vulkan/icd.d 2>/dev/null | tr '\n' ' '))"
fi
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader >>"$log" 2>&1 \
    && say "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd ';')"
fi

# --- adapters: fail early -----------------------------------------------------------------------------------------
soft=()
[ "$accept_software" = 1 ] && soft=(--accept-software)
timeout -k 10 120 "$NODE" "$CHECK" adapters --out "$out/adapters.json" "${soft[@]}" 2>>"$log" | tee -a "$log"
code=${PIPESTATUS[0]}
case "$code" in
  0) ;;
  3) die 3 "only a software adapter (CPU) is visible: no GPU measurement is possible. Is VK_DRIVER_FILES right? \
(--accept-software runs anyway)" ;;
  *) die 2 "Dawn found no usable adapter (exit $code); see $log" ;;
esac
software=$("$NODE" -e 'const a=require(process.argv[1]);process.stdout.write(a.software?"1":"0")' "$out/adapters.json")

# Runs "$@" with at most $1 seconds (and never past the budget), its output to the log; 0 when it succeeded.
phase() {
  local name=$1 limit=$2; shift 2
  local t; t=$(left)
  [ "$limit" -lt "$t" ] && t=$limit
  if [ "$t" -lt 15 ]; then say "$name: skipped, the budget is spent ($(elapsed) s of $budget)"; failed=1; return 1; fi
  say "$name: up to $t s"
  local s; s=$(date +%s)
  timeout -k 10 "$t" "$@" >>"$log" 2>&1
  local c=$?
  if [ "$c" = 124 ] || [ "$c" = 137 ]; then say "$name: TIMED OUT after $t s"; failed=1; return 1; fi
  if [ "$c" != 0 ]; then say "$name: FAILED (exit $c; the log's end: $(tail -1 "$log"))"; failed=1; return 1; fi
  say "$name: done in $(( $(date +%s) - s )) s"
}

size=() models=()
# On software Vulkan the small sizes, and bench gpu on alexnet-mini only (resnet-mini is in the correctness runs).
[ "$software" = 1 ] && size=(--quick) models=(--models alexnet-mini)
torch_reserve=0
python3 -c 'import torch' >/dev/null 2>&1 && torch_reserve=75
phase correctness 240 "$NODE" "$CHECK" correctness --out "$out/correctness.json" "${size[@]}"
phase devices 90 "$NODE" "$CHECK" devices --out "$out/devices.json" "${size[@]}"
bench_limit=$(( $(left) - torch_reserve - 10 ))
if phase "bench gpu" "$bench_limit" "$NODE" "$work/app/dist/bench/main.js" gpu --out "$work/bench" "${size[@]}" "${models[@]}"; then
  cp "$work/bench/gpu.json" "$out/bench.json"
fi
[ -d "$work/bench/gpu" ] && tar -czf "$out/timelines.tar.gz" -C "$work/bench" gpu
if [ "$torch_reserve" -gt 0 ]; then
  phase pytorch "$torch_reserve" python3 "$work/app/bench/torch/gpu_reference.py" --out "$out/torch.json" "${size[@]}"
else
  say "pytorch: python3 has no torch here; skipped"
fi
"$NODE" "$CHECK" summary --dir "$out" --seconds "$(elapsed)" --budget "$budget" | tee "$out/summary.txt"
[ "${PIPESTATUS[0]}" = 0 ] || failed=1
say "$(elapsed) s of $budget; files in $out: $(ls "$out" | tr '\n' ' ')"
exit "$failed"
