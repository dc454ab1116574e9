#!/usr/bin/env bash
# The nccl backend against a real NCCL on a machine with an NVIDIA GPU and driver: builds the addon
# (with the native C++ tests), finds libnccl.so.2 (NCCL_LIBRARY, else the NVIDIA pip wheel
# nvidia-nccl-cu12/cu13, else the loader's path), and runs world-size-1 NCCL communicator tests
# (test/gpu/). CUDA kernels (src/kernels/cuda) are not part of this yet: the backend stages host tensors
# through cudaMalloc'd buffers, so only the CUDA runtime library is needed, not nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA driver or GPU here (nvidia-smi -L fails)" >&2
  exit 2
fi
nvidia-smi -L

if [[ -z "${NCCL_LIBRARY:-}" ]]; then
  wheel=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null || true)
  if [[ -n "$wheel" && -e "$wheel/lib/libnccl.so.2" ]]; then
    export NCCL_LIBRARY="$wheel/lib/libnccl.so.2"
  fi
fi
# The CUDA runtime the backend opens (libcudart.so.13/.12) may come from a wheel too.
cudart=$(python3 -c "import nvidia.cuda_runtime, os; print(os.path.dirname(nvidia.cuda_runtime.__file__))" 2>/dev/null || true)
if [[ -n "$cudart" && -d "$cudart/lib" ]]; then
  export LD_LIBRARY_PATH="$cudart/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
echo "gpu-check: NCCL_LIBRARY=${NCCL_LIBRARY:-libnccl.so.2 (loader path)}"

npm run build
# The C++ tests, nccl_test among them (world size 1 over NCCL_LIBRARY, or libnccl.so.2 when unset).
export NCCL_LIBRARY="${NCCL_LIBRARY:-libnccl.so.2}"
cmake -S native/tests -B native/build/tests
cmake --build native/build/tests -j
ctest --test-dir native/build/tests --output-on-failure

node runner info
node --test --test-concurrency=1 test/gpu/*.test.js
