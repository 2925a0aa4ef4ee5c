#!/usr/bin/env bash
# The GPU checks of the CUDA backend, on one H100 or H200, in under 8 minutes: builds for
# sm_90 (Release, every core) and runs tests/gpu/checks.py: the Ops conformance suite and
# split backward (I and W) on CUDA, end-to-end equivalence of single-GPU plans with the CPU
# reference, GEMM throughput, executor overhead, and measured against predicted step time.
# Writes one Markdown summary, and where PyTorch is installed the kernels measured by shape
# (kernels.json beside it).
#
#   tests/gpu/run.sh [SUMMARY]          (default: build-gpu/gpu-summary.md)
#
# Needs what scripts/setup installs (the build dependencies) plus a GPU driver; set
# CONDUIT_GPU_BUILD to reuse a build directory. On a GPU host without the build dependencies,
# build elsewhere (scripts/setup builds for sm_80 and sm_90 where nvcc is found), pack the
# binaries with the shared libraries they load (tests/gpu/bundle.sh), and set CONDUIT_GPU_BIN
# to their folder (the bundle's env.sh does): the build step is skipped. Exit status 0 only if
# every check passed.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${CONDUIT_GPU_BUILD:-$root/build-gpu}
summary=${1:-$build/gpu-summary.md}

if ! nvidia-smi > /dev/null 2>&1; then
  echo "run.sh: no usable NVIDIA GPU (nvidia-smi failed); nothing to check" >&2
  exit 2
fi

mkdir -p "$build"
bin=${CONDUIT_GPU_BIN:-}
if [ -z "$bin" ]; then
  start=$(date +%s)
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
  source "$root/tests/gpu/binaries.sh"
  ninja -C "$build" -j "$(nproc)" "${gpu_binaries[@]}"
  echo "built in $(( $(date +%s) - start )) s"
  bin=$build/bin
fi

mkdir -p "$build/gpu-work"
python3 "$root/tests/gpu/checks.py" --bin "$bin" --work "$build/gpu-work" \
  --summary "$summary"
