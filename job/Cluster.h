//===- Cluster.h - the machine a plan is priced for --------------*- C++ -*-===//
//
// The figures of one cluster that the cost model prices a plan with, as plain numbers: a job
// file's `cluster` section after its preset is expanded (job/JobFile.h fills it), and the pipe
// dialect's #pipe.cluster attribute (passes/CostModelBuilder.h converts it). Units are SI. The
// presets are the starting points a job file names; each also describes how its device runs
// a transformer's kernels (DeviceKernels), from published measurements (docs/cost-model.md).
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_CLUSTER_H
#define CONDUIT_JOB_CLUSTER_H

#include "absl/types/span.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace conduit {

/// How a device's libraries run a transformer's kernels, for the cost model's GEMM, FP8 and
/// attention models (analysis/Roofline.h; sources in docs/cost-model.md). One set per device, from
/// published kernel measurements; a preset carries its device's, a job cannot override them.
/// Zero `sms`: no such knowledge, and every GEMM sits on the plain roofline.
struct DeviceKernels {
  int64_t sms = 0; ///< streaming multiprocessors: the tiles of one wave
  /// The output tile of the library's large GEMM kernels (m x n) and the depth of one step of
  /// its main loop (k).
  int64_t tileM = 0, tileN = 0, tileK = 0;
  /// The shape at which the GEMM ceiling (the cluster's `efficiency`) holds: the main loop's
  /// rate is the one that reproduces it there (A100: the shape it was measured at; H100: a
  /// shape where tiles and waves cost nothing, the ceiling being a median over many).
  double ceilingM = 0, ceilingN = 0, ceilingK = 0;
  /// The library balances the last wave (stream-K: the tiles' main-loop steps are dealt out
  /// evenly over the SMs), so a partly empty wave costs its share rather than a whole wave.
  bool streamK = false;
  /// Dense FP8 tensor-core peak, FLOP/s (0: the device has none), and the fraction of it the
  /// largest FP8 GEMMs reach.
  double fp8PeakFlops = 0;
  double fp8Efficiency = 0;
  /// The fraction of the memory bandwidth the element-wise kernels reach (0: all of it): norms,
  /// activations, residuals, the routed tokens' permutation, FP8's casts, the optimizer step.
  double streamEfficiency = 0;
  /// streamEfficiency, or all of the bandwidth where it is not known.
  double streamShare() const { return streamEfficiency > 0 ? streamEfficiency : 1.0; }
  /// The fused attention kernel's (FlashAttention-2 on A100, FlashAttention-3 on H100)
  /// fraction of the BF16 peak, forward and backward (whose FLOPs count as 2.5 forwards, as
  /// the papers count them), causal, head dimension 128, measured at `attentionSeqLength`.
  double attentionForward = 0, attentionBackward = 0;
  /// The same for FlashAttention-2 on this device (model.attention "flash2"), at the same
  /// sequence length; on A100 the figures above.
  double flash2Forward = 0, flash2Backward = 0;
  double attentionSeqLength = 0;
};

struct Cluster {
  std::string preset;
  double peakFlops = 0;       ///< per GPU, FLOP/s
  double efficiency = 0;      ///< fraction of the peak the largest GEMMs reach, (0, 1]
  double memoryBandwidth = 0; ///< device memory (HBM), bytes/s
  int64_t memoryBytes = 0;
  int64_t gpusPerNode = 0;
  double intraNodeBandwidth = 0; ///< bytes/s per GPU per direction
  double interNodeBandwidth = 0;
  double latencyS = 0;
  double launchOverheadS = 0; ///< per layer and pass
  /// Measured per-layer times replacing the analytic estimates (absolute path, or empty).
  std::string profile;
  /// The preset's device kernels (not a job key; not carried by the IR, which names the
  /// preset: presetKernels recovers them).
  DeviceKernels kernels;
};

/// The presets a job's `cluster.preset` names, in the order diagnostics list them.
absl::Span<const Cluster> clusterPresets();

/// Their names, in the same order.
absl::Span<const std::string_view> clusterPresetNames();

/// The device kernels of the preset named `preset`, or none (`sms` 0) for another name.
DeviceKernels presetKernels(std::string_view preset);

} // namespace conduit

#endif // CONDUIT_JOB_CLUSTER_H
