//===- Checkpoint.h - training state that survives a crash ------*- C++ -*-===//
//
// A checkpoint is a directory: one file per rank with the state it owns (parameters or
// their shard, optimizer state, optimizer step count; the data position is the step, since
// data depends on (seed, step, sample) only), written to a temporary name and renamed, and a
// manifest written last, by rank 0, once every file is complete. The manifest names the step,
// the world size, a fingerprint of the plan's state layout and each file's size and FNV-1a
// checksum; a reader refuses anything that does not match. The previous checkpoint stays
// valid until the new manifest replaces it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_CHECKPOINT_H
#define CONDUIT_RUNTIME_CHECKPOINT_H

#include "runtime/RankGroup.h"
#include "runtime/exec/Backend.h"

#include <string>
#include <vector>

namespace conduit::runtime {

/// What decides where state lives: pipeline and data sizes, stages and their layers, the
/// sharding, the optimizer, the seed. Plans that agree on it can resume each other's
/// checkpoints (a different schedule, say); others cannot.
uint64_t layoutFingerprint(const Plan &plan);

/// Writes this rank's `states` after `step` (every rank calls it together).
absl::Status writeCheckpoint(const std::string &dir, int64_t step, const Plan &plan,
                             RankGroup &ranks, const std::vector<StageState> &states);

struct LoadedCheckpoint {
  int64_t step = 0;
  std::vector<StageState> states;
};

/// Reads this rank's state (every rank calls it together).
absl::StatusOr<LoadedCheckpoint> readCheckpoint(const std::string &dir, const Plan &plan,
                                                RankGroup &ranks);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_CHECKPOINT_H
