//===- OneFOneBSchedule.cpp - one forward, one backward (PipeDream-Flush) -===//
//
// The order is defined by an in-flight cap per stage: forward while fewer than `cap`
// micro-batches are between their forward and backward, else run the next backward. With
// equal micro-batches the cap is P - s and the order is the textbook 1F1B.
//
// With unequal partitions a backward of stage s waits for the overlapping backwards of stage
// s+1, and the rank of stage s+1 reaches those only after the forwards its own order puts
// before them, which consume forwards of stage s. The orders are therefore built from the last
// stage to the first: for each backward k of stage s, `needed` counts the forwards of stage s
// that the downstream order consumes before it can return the gradients k waits for, and the
// cap is raised until every backward comes after its needed forwards. No rank then waits on
// work its upstream neighbour is not allowed to do yet, so the schedule cannot deadlock.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

#include <algorithm>

using namespace conduit::sched;

namespace {

/// The order of one stage under `cap`, and for each backward the forwards before it.
std::vector<Action> capOrder(int32_t stage, int32_t count, int64_t cap,
                             std::vector<int64_t> &forwardsBefore) {
  std::vector<Action> list;
  list.reserve(2 * count);
  forwardsBefore.assign(count, 0);
  int32_t forwards = 0, backwards = 0;
  while (backwards < count) {
    if (forwards < count && forwards - backwards < cap) {
      list.push_back({ActionKind::Forward, stage, forwards++});
    } else {
      forwardsBefore[backwards] = forwards;
      list.push_back({ActionKind::Backward, stage, backwards++});
    }
  }
  return list;
}

} // namespace

llvm::Expected<Schedule> conduit::sched::scheduleOneFOneB(const ScheduleProblem &problem) {
  if (Violation v = problem.check())
    return llvm::createStringError(*v);
  if (problem.numStages() != problem.numRanks())
    return llvm::createStringError(
        "1f1b runs one stage per device (there are " + std::to_string(problem.numStages()) +
        " stages on " + std::to_string(problem.numRanks()) +
        " ranks); use depth-first (interleaved 1F1B) or breadth-first for several stages per "
        "device");
  const int64_t stages = problem.numStages();
  Schedule schedule;
  schedule.ranks.resize(problem.numRanks());
  std::vector<int64_t> downstreamForwardsBefore; // of stage s+1
  for (int64_t s = stages - 1; s >= 0; --s) {
    const std::vector<int64_t> &bounds = problem.boundaries(s);
    const int32_t count = static_cast<int32_t>(problem.numMicrobatches(s));
    int64_t cap = stages - s;
    if (s + 1 < stages) {
      for (int64_t k = 0; k < count; ++k) {
        // The last downstream backward that k waits for, and the samples the downstream rank
        // has forwarded by then.
        int64_t j = problem.overlapping(s, k, s + 1).second - 1;
        int64_t samples = problem.end(s + 1, downstreamForwardsBefore[j] - 1);
        int64_t needed = std::lower_bound(bounds.begin(), bounds.end(), samples) - bounds.begin();
        cap = std::max(cap, needed - k);
      }
    }
    std::vector<int64_t> forwardsBefore;
    schedule.ranks[problem.rankOfStage(s)] =
        capOrder(static_cast<int32_t>(s), count, cap, forwardsBefore);
    downstreamForwardsBefore = std::move(forwardsBefore);
  }
  return schedule;
}
