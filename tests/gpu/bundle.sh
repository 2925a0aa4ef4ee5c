#!/usr/bin/env bash
# Packs what tests/gpu/run.sh needs into one archive for a GPU host that lacks the build's
# packages (MLIR, Abseil, OpenMPI, OpenBLAS, Google Benchmark): the binaries of a build made
# here (scripts/setup builds for sm_80 and sm_90 where nvcc is found), every shared library
# they load that is neither the C and C++ runtimes nor CUDA's own, and OpenMPI's plugins. The
# CUDA runtime, cuBLAS and NCCL come from the GPU host (its CUDA toolkit or its Python wheels).
#
#   tests/gpu/bundle.sh [BUILD] [ARCHIVE]     (defaults: build, build/gpu-bundle.tar.xz)
#
# On the GPU host, from the repository's root:
#
#   tar xJf gpu-bundle.tar.xz -C /tmp && source /tmp/gpu-bundle/env.sh && tests/gpu/run.sh
#
# env.sh points the loader at the bundle's libraries and at the host's CUDA libraries, OpenMPI
# at its plugins (one process, no daemon: conduit-run with --ranks-per-process or --reference
# needs no mpirun), and run.sh at the binaries (CONDUIT_GPU_BIN).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
archive=${2:-$build/gpu-bundle.tar.xz}
source "$root/tests/gpu/binaries.sh"
for b in "${gpu_binaries[@]}"; do
  [ -x "$build/bin/$b" ] || { echo "bundle.sh: $build/bin/$b is missing; build it first" >&2; exit 1; }
done
plugins=$({ mpicc --showme:libdirs 2>/dev/null || true; } | tr ' ' '\n' | head -1)/openmpi3
[ -d "$plugins" ] || plugins=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
[ -d "$plugins" ] || { echo "bundle.sh: OpenMPI's plugin folder not found" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
out=$stage/gpu-bundle
mkdir -p "$out/bin" "$out/lib" "$out/ompi"
for b in "${gpu_binaries[@]}"; do
  cp "$build/bin/$b" "$out/bin/" && strip "$out/bin/$b"
done
# Plugins for the networks a single process never opens load libraries the host may lack.
for p in "$plugins"/*.so; do
  case $(basename "$p") in *ucx* | *ofi* | *openib* | *psm* | *verbs* | *usnic* | *portals*) ;;
  *) cp "$p" "$out/ompi/" ;; esac
done
# The C library, the C++ runtime and CUDA's libraries stay the host's.
host='^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libresolv|libutil|libz|ld-linux-x86-64|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
for f in "$out"/bin/* "$out"/ompi/*.so; do
  ldd "$f" 2>/dev/null | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  echo "$name" | grep -qE "$host" || cp -L "$path" "$out/lib/$name"
done
cat > "$out/env.sh" <<'EOF'
# Sourced on the GPU host (tests/gpu/bundle.sh).
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cuda=$(find /usr/local /opt /usr/lib \( -name 'libcudart.so.13' -o -name 'libcublas.so.13' \
  -o -name 'libcublasLt.so.13' -o -name 'libnccl.so.2' \) 2>/dev/null | xargs -r -n1 dirname |
  sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=$bundle/lib:$cuda${LD_LIBRARY_PATH:-}
export OPAL_PKGLIBDIR=$bundle/ompi OMPI_MCA_ess_singleton_isolated=1
export CONDUIT_GPU_BIN=$bundle/bin
EOF
tar cJf "$archive" -C "$stage" gpu-bundle
echo "bundle.sh: $archive ($(du -h "$archive" | cut -f1)): ${#gpu_binaries[@]} binaries," \
  "$(ls "$out/lib" | wc -l) libraries, $(ls "$out/ompi" | wc -l) OpenMPI plugins"
