#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs into one folder (default .gpu/, under 40 MB), for a GPU machine that
# has a driver, NCCL and the CUDA runtime but no Node, npm, MPI or network (a lent cloud GPU): the addon built
# without MPI (-D SPMD_WITH_MPI=OFF, so it needs no libmpi there), the GPU C++ tests, this machine's node
# compressed, and the built bundle (dist/). Needs nvcc here, so that the kernels are embedded. There:
#   scripts/gpu-check.sh --prebuilt .gpu
. "$(dirname "$0")/usage.sh" "$@"
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu}
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "gpu-pack: nvcc not found: the kernels would not be embedded" >&2; exit 2; }
npm run build:ts
node runner build --out native/build-gpu --target spmd_native -D SPMD_WITH_MPI=OFF
cmake -S native/tests -B native/build-gpu-tests -DCMAKE_BUILD_TYPE=Release
cmake --build native/build-gpu-tests -j --target cuda_kernels_test nccl_test
mkdir -p "$out"
cp native/build-gpu/Release/spmd_native.node native/build-gpu-tests/cuda_kernels_test native/build-gpu-tests/nccl_test "$out/"
# Node without its symbols (99 MB to 86, packed 24 to 22: the device tool carries 64 MiB a call, the
# repository included). Compressing takes a minute on 2 cores: kept while it is newer than the node it came from.
node_bin="$(command -v node)"
if [ ! "$out/node.xz" -nt "$node_bin" ]; then
  strip -o "$out/node" "$node_bin" 2>/dev/null || cp "$node_bin" "$out/node"
  xz -T0 -9 -f "$out/node"
fi
du -sh "$out" dist
echo "gpu-pack: carry $out and dist, then run scripts/gpu-check.sh --prebuilt $out"
