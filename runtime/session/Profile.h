//===- Profile.h - measured layer times for the cost model ------*- C++ -*-===//
//
// `conduit-run --profile FILE` writes what the compiler's cost model reads as
// `cluster.profile`: per layer of the plan, in order, the measured forward and backward
// seconds for each micro-batch size that ran, and the optimizer's seconds per parameter of a
// step (means over the run, without its first step when it has more: that one pays for
// set-up):
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
// The keys are the constants of runtime/plan/ProfileKeys.h, which the cost model's reader
// names too.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_SESSION_PROFILE_H
#define CONDUIT_RUNTIME_SESSION_PROFILE_H

#include "runtime/Status.h"
#include "runtime/exec/Backend.h"

#include <ostream>
#include <string>

namespace conduit::runtime {

/// One global rank's measured peak memory and the plan's prediction for it.
struct RankMemory {
  int64_t rank = 0, pipelineRank = 0;
  int64_t predictedBytes = 0; ///< the plan's (0: unknown)
  model::MemoryPeak measured;
};

/// Writes the profile of `timings` (from all ranks) and `memory` (one entry per global rank,
/// or none). Fails if a layer of the plan never ran.
absl::Status writeProfile(const Plan &plan, const std::string &backend,
                          const std::vector<LayerTiming> &timings,
                          const std::vector<RankMemory> &memory, std::ostream &os);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_SESSION_PROFILE_H
