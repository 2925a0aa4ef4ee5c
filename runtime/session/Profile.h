//===- Profile.h - measured layer times for the cost model ------*- C++ -*-===//
//
// `conduit-run --profile FILE` writes what the compiler's cost model reads as
// `cluster.profile`: per layer of the plan, in order, the measured forward and backward
// seconds for each micro-batch size that ran, and the optimizer's seconds per parameter of a
// step (each the median over the run's steps of the step's mean, without its first step when
// it has more: that one pays for set-up; typicalTimings):
//
//   {"conduit_profile": 1, "backend": "cpu", "job": "demo",
//    "optimizer": "adam", "optimizer_s_per_param": 4.1e-09,
//    "layers": [{"name": "embedding", "samples": [2], "forward_s": [...], "backward_s": [...]}]}
//
// A layer whose backward ran split (a zero-bubble plan's backward_input and backward_weight)
// at every size listed also has "backward_input_s" and "backward_weight_s", the means of
// the two halves; its "backward_s" is then their sum unless whole backwards ran too.
// Backward times exclude the recomputation of checkpointed activations, which the cost model
// adds itself. "memory" lists each global rank's measured peak memory beside the plan's
// prediction (docs/runtime.md, "Memory"):
//
//   "memory": [{"rank": 0, "pipeline_rank": 0, "predicted_bytes": 1048576,
//               "peak_bytes": 1001472, "held_peak_bytes": 1180160,
//               "at_peak": {"parameters": 262144, ...}}]
//
// "instruction_overhead_s" holds each compute instruction kind's typical seconds beyond its
// layers' (the stage's work around them), and "transport" the latency and bandwidth of a
// ping-pong between global ranks 0 and 1 over the plan's transfer sizes:
//
//   "instruction_overhead_s": {"forward": 2.1e-05, "backward": 3.4e-05},
//   "transport": {"latency_s": 3.2e-06, "bandwidth_bytes_per_s": 4.1e+09}
//
// With expert parallelism, "routed_load" holds the measured imbalance of the routed tokens: the
// most any expert rank took of a piece over its group's balanced share, over the run:
//
//   "routed_load": {"expert": 2, "peak": 1.47, "pieces": 120}
//
// The keys are the constants of runtime/plan/ProfileKeys.h, which the cost model's reader
// names too.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_SESSION_PROFILE_H
#define CONDUIT_RUNTIME_SESSION_PROFILE_H

#include "runtime/Status.h"
#include "runtime/exec/Backend.h"

#include <optional>
#include <ostream>
#include <string>

namespace conduit::runtime {

/// One global rank's measured peak memory and the plan's prediction for it.
struct RankMemory {
  int64_t rank = 0, pipelineRank = 0;
  int64_t predictedBytes = 0; ///< the plan's (0: unknown)
  model::MemoryPeak measured;
};

/// One-way seconds of messages of a few sizes between two ranks (a ping-pong).
struct TransportTiming {
  std::vector<int64_t> bytes;
  std::vector<double> oneWayS;
};

/// The transport's latency (seconds) and bandwidth (bytes/s): the least-squares line through
/// the one-way times; where noise tilts it flat or down, the mean time and, for the
/// bandwidth, the bound the times give (the largest size over their spread).
struct TransportFit {
  double latencyS = 0, bandwidth = 0;
};
TransportFit fitTransport(const TransportTiming &timing);

/// Global ranks 0 and 1 time the transport between them (each calls it, together): a
/// ping-pong of one float, of the plan's point-to-point sizes and of a size that shows the
/// bandwidth (1 MiB, or 4 times the largest), as the executor waits for a transfer.
absl::StatusOr<TransportTiming> timeTransport(const Plan &plan, Backend &backend, int64_t rank);

/// What a run measured besides its layers, each where it was measured.
struct RunMeasurements {
  std::vector<RankMemory> memory;              ///< one entry per global rank, or none
  std::optional<TransportTiming> transport;    ///< the ping-pong, when timed
  std::optional<model::RoutedLoad> routedLoad; ///< expert parallelism: every rank's together
};

/// One step's timings standing for them all: per layer and size, and per pass, the median
/// over the steps of the step's mean time, times the run's count. A step that something else
/// on the machine disturbed (a preempted process, another job's burst) then moves nothing,
/// where it would move a mean over the run. Entries keep the order of their first step.
std::vector<LayerTiming> typicalTimings(const std::vector<std::vector<LayerTiming>> &steps);

/// The median of `values` (the mean of the middle two when their count is even; 0 when
/// empty).
double median(std::vector<double> values);

/// Writes the profile of `timings` (from all ranks) and `measured`. Fails if a layer of the
/// plan never ran.
absl::Status writeProfile(const Plan &plan, const std::string &backend,
                          const std::vector<LayerTiming> &timings, const RunMeasurements &measured,
                          std::ostream &os);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_SESSION_PROFILE_H
