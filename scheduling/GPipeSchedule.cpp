//===- GPipeSchedule.cpp - all forwards, then all backwards ---------------===//

#include "scheduling/Schedulers.h"

using namespace conduit::sched;

llvm::Expected<Schedule> conduit::sched::scheduleGPipe(const ScheduleProblem &problem) {
  if (Violation v = problem.check())
    return llvm::createStringError(*v);
  if (problem.numStages() != problem.numRanks())
    return llvm::createStringError(
        "gpipe runs one stage per device (there are " + std::to_string(problem.numStages()) +
        " stages on " + std::to_string(problem.numRanks()) +
        " ranks); use breadth-first, which runs GPipe's order on a looped placement");
  Schedule schedule;
  schedule.ranks.resize(problem.numRanks());
  for (int64_t r = 0; r < problem.numRanks(); ++r) {
    const int32_t s = static_cast<int32_t>(problem.localStages(r).front());
    const int32_t count = static_cast<int32_t>(problem.numMicrobatches(s));
    std::vector<Action> &list = schedule.ranks[r];
    list.reserve(2 * count);
    for (int32_t m = 0; m < count; ++m)
      list.push_back({ActionKind::Forward, s, m});
    for (int32_t m = count - 1; m >= 0; --m)
      list.push_back({ActionKind::Backward, s, m});
  }
  return schedule;
}
