//===- DepthFirstSchedule.cpp - Megatron-LM interleaved 1F1B --------------===//
//
// Megatron-LM's schedule table (get_schedule_table) and warm-up rule, with its group size
// (microbatch_group_size_per_vp_stage): N = P is the depth-first schedule, N = M orders the
// table breadth-first but keeps the 1F1B steady state.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

#include <algorithm>

using namespace conduit::sched;

llvm::Expected<Schedule> conduit::sched::scheduleDepthFirst(const ScheduleProblem &problem,
                                                            int64_t groupSize) {
  if (Violation v = problem.check())
    return llvm::createStringError(*v);
  const int64_t ranks = problem.numRanks();
  const int64_t stages = problem.numStages();
  if (stages % ranks != 0 || stages / ranks < 2)
    return llvm::createStringError("depth-first interleaves several stages per device (there are " +
                                   std::to_string(stages) + " stages on " + std::to_string(ranks) +
                                   " ranks); with one stage per device use 1f1b");
  const int64_t loops = stages / ranks;
  for (int64_t s = 0; s < stages; ++s)
    if (problem.rankOfStage(s) != s % ranks)
      return llvm::createStringError(
          "depth-first needs the looped placement (stage s on rank s mod P); stage " +
          std::to_string(s) + " is on rank " + std::to_string(problem.rankOfStage(s)) +
          "; use breadth-first for other placements");
  const int64_t count = problem.numMicrobatches(0);
  for (int64_t s = 1; s < stages; ++s)
    if (problem.numMicrobatches(s) != count)
      return llvm::createStringError(
          "depth-first needs the same number of micro-batches on every stage (stage 0 has " +
          std::to_string(count) + ", stage " + std::to_string(s) + " has " +
          std::to_string(problem.numMicrobatches(s)) +
          "); use gpipe, 1f1b or breadth-first with unequal partitions");
  const int64_t n = groupSize == 0 ? ranks : groupSize;
  if (std::optional<GroupingViolation> v = checkDepthFirstGrouping(count, ranks, n))
    return llvm::createStringError(v->message);

  // The schedule table: (micro-batch, local stage) for every forward, in order.
  std::vector<std::pair<int32_t, int32_t>> table;
  table.reserve(count * loops);
  for (int64_t first = 0; first < count; first += n) {
    int64_t last = first + n >= count ? count : first + n;
    for (int64_t c = 0; c < loops; ++c)
      for (int64_t m = first; m < last; ++m)
        table.emplace_back(int32_t(m), int32_t(c));
  }

  const int64_t total = count * loops;
  Schedule schedule;
  schedule.ranks.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    auto forward = [&](int64_t k) {
      auto [m, c] = table[k];
      return Action{ActionKind::Forward, int32_t(c * ranks + r), m};
    };
    auto backward = [&](int64_t k) {
      auto [m, c] = table[k];
      return Action{ActionKind::Backward, int32_t((loops - 1 - c) * ranks + r), m};
    };
    const int64_t warmup = std::min(2 * (ranks - r - 1) + (loops - 1) * n, total);
    std::vector<Action> &list = schedule.ranks[r];
    list.reserve(2 * total);
    for (int64_t k = 0; k < warmup; ++k)
      list.push_back(forward(k));
    for (int64_t k = warmup; k < total; ++k) {
      list.push_back(forward(k));
      list.push_back(backward(k - warmup));
    }
    for (int64_t k = total - warmup; k < total; ++k)
      list.push_back(backward(k));
  }
  return schedule;
}
