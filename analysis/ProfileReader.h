//===- ProfileReader.h - measured layer times -------------------*- C++ -*-===//
//
// Reads the profile files `conduit-run --profile` writes (runtime/session/Profile.h is the writer):
// each layer's measured forward and backward seconds at a few micro-batch sizes, and the
// optimizer's seconds per parameter, and (newer profiles) each compute instruction kind's time
// beyond its layers' and the transport's latency and bandwidth between two ranks. The cost model
// replaces its analytic estimates with them when a job names one as `cluster.profile`. A profile
// may also list each rank's measured peak memory beside the plan's prediction; it is checked and
// kept, but costs nothing. Problems name the file and the key.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_PROFILEREADER_H
#define CONDUIT_ANALYSIS_PROFILEREADER_H

#include "job/JsonReader.h"

#include "llvm/Support/Error.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace conduit {

/// Measured per-layer times at a few micro-batch sizes (what `conduit-run --profile` writes).
struct LayerProfile {
  std::string name;
  std::vector<double> samples, forwardS, backwardS;
  /// The halves of the backward when measured apart (empty otherwise).
  std::vector<double> inputS, weightS;
};

/// One rank's measured peak memory (runtime/plan/ProfileKeys.h, "memory").
struct RankMemoryProfile {
  int64_t rank = 0, pipelineRank = 0;
  int64_t predictedBytes = 0, peakBytes = 0, heldPeakBytes = 0;
  /// Counted bytes of each category of the memory plan at the peak, in its order.
  std::vector<int64_t> atPeak;
};

/// An expert-parallel run's measured imbalance (runtime/plan/ProfileKeys.h, "routed_load"):
/// the most routed tokens an expert rank took of a piece over its group's balanced share, over
/// the run's pieces, for groups of `expert` ranks.
struct RoutedLoadProfile {
  int64_t expert = 0;
  double peak = 1;
  int64_t pieces = 0;
};

/// A profile file: its layers, and the measured time of the optimizer per parameter (absent
/// from profiles that did not measure it).
struct MeasuredProfile {
  std::vector<LayerProfile> layers;
  std::vector<RankMemoryProfile> memory; ///< empty when the profile has none
  std::optional<double> optimizerSPerParam;
  bool optimizerAdam = true; ///< the optimizer that was measured
  /// Per compute instruction kind (forward, backward, backward_input, backward_weight: the
  /// order of runtime/plan/ProfileKeys.h), its typical seconds beyond its layers' times (the
  /// run's typical step: runtime/session/Profile.h), where the profile measured it.
  std::array<std::optional<double>, 4> instructionOverheadS;
  /// The transport between two ranks of the run, where the profile measured it: one way,
  /// seconds and bytes/s.
  std::optional<double> transportLatencyS, transportBandwidth;
  /// Where the run had expert parallelism: its measured imbalance.
  std::optional<RoutedLoadProfile> routedLoad;
  /// The backend that ran ("cpu" or "cuda").
  std::string backend;
};

/// The seconds `times` (a layer's forward_s or backward_s) give for a micro-batch of `samples`:
/// piecewise linear through the measurements, extended linearly beyond them, never negative.
double profiledTime(const std::vector<double> &times, const LayerProfile &layer, int64_t samples);

/// Reads a profile file; problems name the file and the key.
llvm::Expected<MeasuredProfile> readProfile(llvm::StringRef path);

/// The same for a profile already parsed from the file at `path`.
llvm::Expected<MeasuredProfile> parseProfile(const Json &root, llvm::StringRef path);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_PROFILEREADER_H
