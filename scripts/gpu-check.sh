#!/usr/bin/env bash
# The nccl backend and the CUDA kernels on a machine with an NVIDIA GPU and driver. Needs nvcc (CUDA 12 or
# 13) on the PATH or in /usr/local/cuda/bin, so that the build embeds the kernels. Builds the addon and the
# native C++ tests, finds libnccl.so.2 (NCCL_LIBRARY, else the NVIDIA pip wheel nvidia-nccl-cu12/cu13, else
# the loader's path), then runs:
#  - the C++ tests: cuda_kernels_test (every CUDA kernel against the CPU's, and each one's bandwidth against
#    a device-to-device copy at 256 MiB: at least 80% for every kernel), nccl_test (world-size-1
#    NCCL communicators, the lane over device memory, ncclCommSplit, the 1-bit and quantized allreduces on
#    the GPU against the same ops in host memory), and the rest of the suite;
#  - test/gpu/: one-rank jobs on device "cuda" through the real NCCL.
#
# `--prebuilt DIR` (what scripts/gpu-pack.sh made elsewhere, with dist/ beside it) builds nothing: for a
# machine without Node, npm or a compiler. Its node is unpacked with Python's lzma.
. "$(dirname "$0")/usage.sh" "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
prebuilt=""
if [[ "${1:-}" == "--prebuilt" ]]; then
  prebuilt=${2:?"--prebuilt needs the folder scripts/gpu-pack.sh wrote"}
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA driver or GPU here (nvidia-smi -L fails)" >&2
  exit 2
fi
nvidia-smi -L
export PATH="$PATH:/usr/local/cuda/bin"
if [[ -n "$prebuilt" ]]; then
  if ! command -v node >/dev/null; then
    mkdir -p /tmp/gpu-check-node
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$prebuilt/node.xz" /tmp/gpu-check-node/node
    chmod +x /tmp/gpu-check-node/node
    export PATH="/tmp/gpu-check-node:$PATH"
  fi
elif ! command -v nvcc >/dev/null; then
  echo "gpu-check: nvcc not found: the build would embed no CUDA kernels" >&2
  exit 2
fi

if [[ -z "${NCCL_LIBRARY:-}" ]]; then
  wheel=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null || true)
  if [[ -n "$wheel" && -e "$wheel/lib/libnccl.so.2" ]]; then
    export NCCL_LIBRARY="$wheel/lib/libnccl.so.2"
  fi
fi
# The CUDA runtime the backend opens (libcudart.so.13/.12) may come from a wheel too, or the toolkit's folder.
cudart=$(python3 -c "import nvidia.cuda_runtime, os; print(os.path.dirname(nvidia.cuda_runtime.__file__))" 2>/dev/null || true)
if [[ -n "$cudart" && -d "$cudart/lib" ]]; then
  export LD_LIBRARY_PATH="$cudart/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif [[ -d /usr/local/cuda/lib64 ]]; then
  export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "gpu-check: NCCL_LIBRARY=${NCCL_LIBRARY:-libnccl.so.2 (loader path)}"

if [[ -n "$prebuilt" ]]; then
  mkdir -p native/build/Release && cp "$prebuilt/spmd_native.node" native/build/Release/
  tests=$prebuilt
else
  npm run build
  tests=native/build/tests
fi
node runner info
node -e 'const k = require("./native/build/Release/spmd_native.node").cudaKernels;
         if (!k) { console.error("gpu-check: the addon embeds no CUDA kernels"); process.exit(1); }
         console.log(`gpu-check: CUDA kernels for ${k.archs}, ${k.bytes} bytes`);'

# The C++ tests. ctest would count a skip (77: no GPU seen, no NCCL) as a pass, which would hide what this
# script is for: the GPU ones run on their own, and must pass.
export NCCL_LIBRARY="${NCCL_LIBRARY:-libnccl.so.2}"
if [[ -z "$prebuilt" ]]; then
  cmake -S native/tests -B native/build/tests -DCMAKE_BUILD_TYPE=Release
  cmake --build native/build/tests -j
  ctest --test-dir native/build/tests --output-on-failure -E '^(cuda_kernels|nccl)$'
fi
# Every part runs even when one fails (a kernel below its speed gate says nothing of NCCL), and the script
# fails at the end naming them all.
failed=()
for t in cuda_kernels_test nccl_test; do
  status=0
  "$tests/$t" || status=$?
  if [[ $status -ne 0 ]]; then
    echo "gpu-check: $t did not pass (exit $status; 77 is a skip)" >&2
    failed+=("$t")
  fi
done

node --test --test-concurrency=1 test/gpu/*.test.js || failed+=("test/gpu")
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "gpu-check: failed: ${failed[*]}" >&2
  exit 1
fi
