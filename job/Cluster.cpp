//===- Cluster.cpp - the cluster presets ----------------------------------===//
//
// NVIDIA datasheets: the dense BF16 tensor-core peak and the HBM bandwidth. The links at what
// NCCL moves over them, about 80% of NVLink's line rate once its packets' protocol overhead is
// paid (20 GB/s for each of an A100's 12 links of 25, 20.6 for each of a Hopper GPU's 18:
// NVIDIA/nccl issues #1054 and #1397, NVIDIA/nccl-tests issues #149 and #212) and one network
// adapter per GPU near its line rate (24 GB/s of a 200 Gb/s HDR adapter, 48 of a 400 Gb/s NDR
// one: NVIDIA/nccl-tests issues #119, #267 and #290). The efficiency is the measured
// largest-GEMM ceiling, and the device kernels come from published kernel measurements and
// documentation, all cited in docs/cost-model.md; the defaults for latency and launch overhead
// are discussed there too.
//
//===----------------------------------------------------------------------===//

#include "job/Cluster.h"

#include <vector>

using namespace conduit;

namespace {

// A100 SXM: 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper); cuBLAS's large BF16
// GEMM tile 256 x 128, main-loop steps of 64 (NVIDIA, "Matrix Multiplication Background
// User's Guide"). The ceiling is what cuBLASLt sustains on large GEMMs of an A100-SXM4-80GB:
// 253.7 of 312 TFLOP/s at 8192 x 8192 x 8192, the median of its three largest shapes (250.8
// to 256.5; Azure's AI benchmarking guide, ND A100 v4 results, GEMM CuBLASLt table, FP16,
// whose tensor-core rate is BF16's on A100). (S. Bekman's search over shapes found 267.9 at
// 6912 x 16384 x 2048, and 271.2 at 1024 x 10240 x 5120 with the cache cleared: the best of
// many shapes, as the search's Hopper figure was.) No FP8. Element-wise kernels: BabelStream
// 5.0's CUDA triad on an A100-SXM4-80GB, 1,724.8 GB/s of 2,039 (0.846; the UK Research and
// Innovation benchmark suite's BabelStream README, Tursa; Azure's guide measured 1.70 TB/s).
// FlashAttention-2, causal, head dimension 128, at 16k tokens: 148 TFLOP/s forward and 186
// backward (Dao, arXiv 2307.08691, figures 5 and 6).
DeviceKernels a100Kernels() {
  DeviceKernels k;
  k.sms = 108;
  k.tileM = 256, k.tileN = 128, k.tileK = 64;
  k.ceilingM = 8192, k.ceilingN = 8192, k.ceilingK = 8192;
  k.attentionForward = 148.0 / 312, k.attentionBackward = 186.0 / 312;
  k.flash2Forward = k.attentionForward, k.flash2Backward = k.attentionBackward;
  k.attentionSeqLength = 16384;
  k.streamEfficiency = 1724.8e9 / 2.039e12;
  return k;
}

// H100 SXM: 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper); the Hopper GEMM
// tile 128 x 256, steps of 64 (CUTLASS's warp-specialized kernels), with the last wave balanced
// over the SMs (stream-K): measured, a sweep across wave boundaries shows no steps. The
// ceiling is what cuBLAS sustains on the GEMMs of transformer blocks, measured on one H200
// (tests/gpu/kernels.py, testdata/measured/h200-kernels.json: the forward, input- and
// weight-gradient GEMMs of blocks of hidden size 4096 and 8192, random BF16 operands): a
// median of 667 of 989 TFLOP/s, taken at 8192 x 8192 x 8192, where tiles and waves cost the
// model nothing. (S. Bekman's search over shapes found 792.1 at 6144 x 17920 x 2816, which
// that machine ran at 593; the fastest shape it measured ran at 766.) FP8: 1979 TFLOP/s dense
// (datasheet), its GEMMs 1.90 times as fast as BF16 ones of the same shapes without the casts
// (Transformer Engine, "GEMM profiling across precisions", H200), so 1.90 x 667 / 989 / 2 of
// the FP8 peak (measured on the same H200: a median 1.82 times the BF16 rate).
// FlashAttention-3, head dimension 128, at 16k tokens: 616 TFLOP/s forward (causal) and 561
// backward (Shah et al., arXiv 2407.08608, figures 5 and 6); FlashAttention-2 in the same
// figures, 335 forward and 322 backward. H200 is the same chip with more and faster memory.
DeviceKernels h100Kernels() {
  DeviceKernels k;
  k.sms = 132;
  k.tileM = 128, k.tileN = 256, k.tileK = 64;
  k.ceilingM = 8192, k.ceilingN = 8192, k.ceilingK = 8192;
  k.streamK = true;
  k.fp8PeakFlops = 1979e12;
  k.fp8Efficiency = 1.90 * (667.0 / 989) / 2;
  // Transformer Engine's quantization overhead on H200 for the same 24 layers of 12 linears
  // (M = 15,872 tokens, h 4096, FFN 16384): delayed-scaling autocast 18.978 ms a layer against
  // the pre-quantized kernels' 16.785, 2.193 ms to cast 1,495 M inputs (read 2, write 2: both
  // layouts) and 988 M weights (read 2, write 1), 8.94 GB: 0.850 of the 4.8 TB/s. Current
  // scaling, which reads each once more for its amax, then predicts 3.41 ms where it measured
  // 3.500 (-2.6%). docs/cost-model.md. Every element-wise kernel is priced at that share
  // (BabelStream's triad in Azure's guide: 2.97 TB/s on H100, 0.887; 4.15 on H200, 0.865).
  k.streamEfficiency = 0.850;
  k.attentionForward = 616.0 / 989, k.attentionBackward = 561.0 / 989;
  k.flash2Forward = 335.0 / 989, k.flash2Backward = 322.0 / 989;
  k.attentionSeqLength = 16384;
  return k;
}

const Cluster kPresets[] = {
    {"a100-80gb", 312e12, 253.7 / 312, 2.039e12, int64_t(80) << 30, 8, 12 * 20e9, 24e9, 10e-6, 0.0,
     "", a100Kernels()},
    {"h100-80gb", 989e12, 667.0 / 989, 3.35e12, int64_t(80) << 30, 8, 18 * 20.6e9, 48e9, 10e-6, 0.0,
     "", h100Kernels()},
    {"h200-141gb", 989e12, 667.0 / 989, 4.8e12, int64_t(141) << 30, 8, 18 * 20.6e9, 48e9, 10e-6,
     0.0, "", h100Kernels()},
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
