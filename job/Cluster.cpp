//===- Cluster.cpp - the cluster presets ----------------------------------===//
//
// NVIDIA datasheets (dense BF16 tensor-core peak; HBM bandwidth; NVLink and one NIC per GPU,
// per direction); the efficiency is the measured largest-GEMM ceiling, and the device kernels
// come from published kernel measurements and documentation, all cited in docs/cost-model.md;
// the defaults for latency and launch overhead are discussed there too.
//
//===----------------------------------------------------------------------===//

#include "job/Cluster.h"

#include <vector>

using namespace conduit;

namespace {

// A100 SXM: 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper); cuBLAS's large BF16
// GEMM tile 256 x 128, main-loop steps of 64 (NVIDIA, "Matrix Multiplication Background
// User's Guide"); the largest GEMM measured at 267.9 of 312 TFLOP/s at 6912 x 16384 x 2048
// (S. Bekman, "Machine Learning Engineering", maximum achievable matmul FLOPS table).
constexpr DeviceKernels kA100{108, 256, 128, 64, 6912, 16384, 2048};
// H100 SXM: 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper); the Hopper GEMM
// tile 128 x 256, steps of 64 (CUTLASS's warp-specialized kernels); 792.1 of 989 TFLOP/s at
// 6144 x 17920 x 2816 (the same table). H200 is the same chip with more and faster memory.
constexpr DeviceKernels kH100{132, 128, 256, 64, 6144, 17920, 2816};

const Cluster kPresets[] = {
    {"a100-80gb", 312e12, 267.9 / 312, 2.039e12, int64_t(80) << 30, 8, 300e9, 25e9, 10e-6, 0.0, "",
     kA100},
    {"h100-80gb", 989e12, 792.1 / 989, 3.35e12, int64_t(80) << 30, 8, 450e9, 50e9, 10e-6, 0.0, "",
     kH100},
    {"h200-141gb", 989e12, 792.1 / 989, 4.8e12, int64_t(141) << 30, 8, 450e9, 50e9, 10e-6, 0.0, "",
     kH100},
};

} // namespace

absl::Span<const Cluster> conduit::clusterPresets() { return kPresets; }

absl::Span<const std::string_view> conduit::clusterPresetNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const Cluster &preset : kPresets)
      out.push_back(preset.preset);
    return out;
  }();
  return names;
}

DeviceKernels conduit::presetKernels(std::string_view preset) {
  for (const Cluster &c : kPresets)
    if (c.preset == preset)
      return c.kernels;
  return {};
}
