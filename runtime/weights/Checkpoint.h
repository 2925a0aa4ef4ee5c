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

#ifndef CONDUIT_RUNTIME_WEIGHTS_CHECKPOINT_H
#define CONDUIT_RUNTIME_WEIGHTS_CHECKPOINT_H

#include "runtime/exec/Backend.h"
#include "runtime/session/RankGroup.h"

#include <string>
#include <string_view>
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

// The two formats on their own, as readCheckpoint uses them: bytes in, checked values out.
// `path` names the file in messages.

struct CheckpointManifest {
  int64_t step = 0, worldSize = 0;
  uint64_t layout = 0;
  std::string directory;
  std::vector<std::pair<uint64_t, uint64_t>> files; ///< per rank: bytes, FNV-1a checksum
};

/// Parses a manifest: every line known, step and world size within Limits.h, one file line
/// per rank.
absl::StatusOr<CheckpointManifest> parseCheckpointManifest(std::string_view text,
                                                           const std::string &path);

/// Parses the rank file of global rank `rank` written under `manifest` for `plan`: the header
/// must repeat the manifest, and each stage's state must belong to a stage of the rank, in
/// order, with the parameter and optimizer-state counts `plan` gives it and at most as many
/// optimizer steps as training steps.
absl::StatusOr<std::vector<StageState>> parseRankState(std::string_view bytes,
                                                       const CheckpointManifest &manifest,
                                                       const Plan &plan, int64_t rank,
                                                       const std::string &path);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_WEIGHTS_CHECKPOINT_H
