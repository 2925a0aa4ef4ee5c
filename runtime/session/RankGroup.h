//===- RankGroup.h - the ranks of a run, as its run loop sees them -*- C++ -*-===//
//
// The session (Session.h) and checkpoints coordinate the ranks of a run with a few small host
// messages: whether every rank succeeded, every rank's bytes at rank 0 (traces, profiles,
// checkpoint checksums), a barrier. A RankGroup carries them, whatever runs the ranks: one MPI
// process each (MpiRankGroup), or threads of this process (LocalRankHub: the loopback runs,
// on the CPU or on one GPU). Training data never goes this way; it moves through a
// backend's Transport.
//
// Every rank calls each operation together, in the same order. A failed thread rank aborts
// the hub, and every call of the others then fails at once instead of waiting for it.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_SESSION_RANKGROUP_H
#define CONDUIT_RUNTIME_SESSION_RANKGROUP_H

#include "runtime/Status.h"
#include "runtime/exec/Mpi.h"

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace conduit::runtime {

class RankGroup {
public:
  virtual ~RankGroup() = default;
  /// This rank (a global rank of the plan) and the number of ranks.
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// Whether `ok` holds on every rank.
  virtual absl::StatusOr<bool> allOk(bool ok) = 0;
  /// Every rank's `mine`, in rank order, at rank 0; empty on the others.
  virtual absl::StatusOr<std::vector<std::string>> gatherAtZero(const std::string &mine) = 0;
  /// Returns once every rank has called it.
  virtual absl::Status barrier() = 0;
};

/// The first error of any rank, known to all (every rank calls it together): `local` where it
/// failed, elsewhere an Aborted error saying that another rank could not `what`.
absl::Status agree(RankGroup &ranks, const absl::Status &local, const std::string &what);

/// One rank per MPI process.
class MpiRankGroup final : public RankGroup {
public:
  explicit MpiRankGroup(MpiWorld world) : world(world) {}
  int64_t rank() const override { return world.rank; }
  int64_t size() const override { return world.size; }
  absl::StatusOr<bool> allOk(bool ok) override;
  absl::StatusOr<std::vector<std::string>> gatherAtZero(const std::string &mine) override;
  absl::Status barrier() override;

private:
  MpiWorld world;
};

/// Where `size` ranks that are threads of this process meet.
class LocalRankHub {
public:
  explicit LocalRankHub(int64_t size) : slots(size) {}
  /// The group of rank `rank` (one per thread).
  std::unique_ptr<RankGroup> member(int64_t rank);
  /// Makes every pending and later call fail (a rank failed).
  void abort();
  bool aborted() const;

private:
  friend class LocalRankGroup;
  /// Every rank's `mine`, once all have given theirs.
  absl::StatusOr<std::vector<std::string>> allGather(int64_t rank, const std::string &mine);

  mutable std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> slots, last;
  int64_t present = 0, generation = 0;
  bool stopped = false;
};

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_SESSION_RANKGROUP_H
