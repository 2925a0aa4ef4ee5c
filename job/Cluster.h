//===- Cluster.h - the machine a plan is priced for --------------*- C++ -*-===//
//
// The figures of one cluster that the cost model prices a plan with, as plain numbers: a job
// file's `cluster` section after its preset is expanded (job/JobFile.h fills it), and the pipe
// dialect's #pipe.cluster attribute (passes/CostModelBuilder.h converts it). Units are SI. The
// presets are the starting points a job file names.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_CLUSTER_H
#define CONDUIT_JOB_CLUSTER_H

#include "absl/types/span.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace conduit {

struct Cluster {
  std::string preset;
  double peakFlops = 0;       ///< per GPU, FLOP/s
  double efficiency = 0;      ///< achievable fraction of the peak, (0, 1]: a GEMM's ceiling
  double memoryBandwidth = 0; ///< device memory (HBM), bytes/s
  int64_t memoryBytes = 0;
  int64_t gpusPerNode = 0;
  double intraNodeBandwidth = 0; ///< bytes/s per GPU per direction
  double interNodeBandwidth = 0;
  double latencyS = 0;
  double launchOverheadS = 0; ///< per layer and pass
  /// Measured per-layer times replacing the analytic estimates (absolute path, or empty).
  std::string profile;
};

/// The presets a job's `cluster.preset` names, in the order diagnostics list them.
absl::Span<const Cluster> clusterPresets();

/// Their names, in the same order.
absl::Span<const std::string_view> clusterPresetNames();

} // namespace conduit

#endif // CONDUIT_JOB_CLUSTER_H
