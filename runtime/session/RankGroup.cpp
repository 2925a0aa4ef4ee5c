//===- RankGroup.cpp - the ranks of a run, as its run loop sees them ------===//

#include "runtime/session/RankGroup.h"

#include "absl/strings/str_cat.h"

namespace conduit::runtime {

absl::Status agree(RankGroup &ranks, const absl::Status &local, const std::string &what) {
  CONDUIT_ASSIGN_OR_RETURN(bool all, ranks.allOk(local.ok()));
  if (!local.ok())
    return local;
  if (!all)
    return absl::AbortedError(absl::StrCat("another process could not ", what));
  return absl::OkStatus();
}

absl::StatusOr<bool> MpiRankGroup::allOk(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  CONDUIT_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all != 0;
}

absl::StatusOr<std::vector<std::string>> MpiRankGroup::gatherAtZero(const std::string &mine) {
  int size = static_cast<int>(mine.size());
  std::vector<int> sizes(world.size), offsets(world.size);
  CONDUIT_MPI(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < world.size; ++r) {
    offsets[r] = total;
    total += sizes[r];
  }
  std::string all(world.rank == 0 ? total : 0, '\0');
  CONDUIT_MPI(MPI_Gatherv(mine.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(),
                          MPI_BYTE, 0, MPI_COMM_WORLD));
  std::vector<std::string> out;
  if (world.rank == 0)
    for (int r = 0; r < world.size; ++r)
      out.push_back(all.substr(offsets[r], sizes[r]));
  return out;
}

absl::Status MpiRankGroup::barrier() {
  CONDUIT_MPI(MPI_Barrier(MPI_COMM_WORLD));
  return absl::OkStatus();
}

/// A thread's view of a LocalRankHub.
class LocalRankGroup final : public RankGroup {
public:
  LocalRankGroup(LocalRankHub &hub, int64_t rank) : hub(hub), me(rank) {}
  int64_t rank() const override { return me; }
  int64_t size() const override { return static_cast<int64_t>(hub.slots.size()); }
  absl::StatusOr<bool> allOk(bool ok) override {
    CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all, hub.allGather(me, ok ? "1" : "0"));
    for (const std::string &v : all)
      if (v != "1")
        return false;
    return true;
  }
  absl::StatusOr<std::vector<std::string>> gatherAtZero(const std::string &mine) override {
    CONDUIT_ASSIGN_OR_RETURN(std::vector<std::string> all, hub.allGather(me, mine));
    if (me != 0)
      return std::vector<std::string>();
    return all;
  }
  absl::Status barrier() override { return hub.allGather(me, "").status(); }

private:
  LocalRankHub &hub;
  int64_t me;
};

std::unique_ptr<RankGroup> LocalRankHub::member(int64_t rank) {
  return std::make_unique<LocalRankGroup>(*this, rank);
}

void LocalRankHub::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopped = true;
  }
  changed.notify_all();
}

bool LocalRankHub::aborted() const {
  std::lock_guard<std::mutex> lock(mutex);
  return stopped;
}

absl::StatusOr<std::vector<std::string>> LocalRankHub::allGather(int64_t rank,
                                                                 const std::string &mine) {
  std::unique_lock<std::mutex> lock(mutex);
  if (stopped)
    return absl::AbortedError("another rank of this process failed");
  slots[rank] = mine;
  const int64_t mineGeneration = generation;
  if (++present == static_cast<int64_t>(slots.size())) {
    // The last to arrive publishes the round and opens the next one.
    last = slots;
    present = 0;
    ++generation;
    changed.notify_all();
    return last;
  }
  changed.wait(lock, [&] { return stopped || generation != mineGeneration; });
  if (generation == mineGeneration)
    return absl::AbortedError("another rank of this process failed");
  return last;
}

} // namespace conduit::runtime
