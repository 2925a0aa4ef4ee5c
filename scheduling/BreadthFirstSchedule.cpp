//===- BreadthFirstSchedule.cpp - looped breadth-first order --------------===//
//
// The order of PyTorch's ScheduleLoopedBFS and of the BFPP paper: all micro-batches through
// each local stage in turn, then the backwards in reverse. A stage's gradients are complete as
// soon as its last backward runs, which is what lets its reduce-scatter start early.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

using namespace conduit::sched;

llvm::Expected<Schedule> conduit::sched::scheduleBreadthFirst(const ScheduleProblem &problem) {
  if (Violation v = problem.check())
    return llvm::createStringError(*v);
  Schedule schedule;
  schedule.ranks.resize(problem.numRanks());
  for (int64_t r = 0; r < problem.numRanks(); ++r) {
    const std::vector<int64_t> &stages = problem.localStages(r);
    std::vector<Action> &list = schedule.ranks[r];
    for (int64_t stage : stages)
      for (int64_t m = 0; m < problem.numMicrobatches(stage); ++m)
        list.push_back({ActionKind::Forward, int32_t(stage), int32_t(m)});
    for (auto it = stages.rbegin(); it != stages.rend(); ++it)
      for (int64_t m = problem.numMicrobatches(*it) - 1; m >= 0; --m)
        list.push_back({ActionKind::Backward, int32_t(*it), int32_t(m)});
  }
  return schedule;
}
