//===- ScheduleDispatch.cpp - the scheduler of each schedule --------------===//

#include "scheduling/Schedulers.h"

using namespace conduit;
using namespace conduit::sched;

llvm::Expected<Schedule>
conduit::sched::runScheduler(runtime::Schedule schedule, const ScheduleProblem &problem,
                             int64_t groupSize, bool splitBackward, const ActionTimes *times,
                             std::optional<int64_t> deferLimit, Deferral deferral) {
  ActionTimes perSample;
  if (!times) {
    perSample = ActionTimes::perSample(problem, 1, 1, 1);
    times = &perSample;
  }
  llvm::Expected<Schedule> whole = [&]() -> llvm::Expected<Schedule> {
    switch (schedule) {
    case runtime::Schedule::GPipe:
      return scheduleGPipe(problem);
    case runtime::Schedule::OneFOneB:
      return scheduleOneFOneB(problem);
    case runtime::Schedule::DepthFirst:
      return scheduleDepthFirst(problem, groupSize);
    case runtime::Schedule::BreadthFirst:
      return scheduleBreadthFirst(problem);
    case runtime::Schedule::ZeroBubbleH1:
      return scheduleZeroBubbleH1(problem, *times, deferLimit);
    case runtime::Schedule::InterleavedZeroBubble:
      return scheduleInterleavedZeroBubble(problem, groupSize, *times, deferLimit);
    case runtime::Schedule::ZeroBubbleV:
      return scheduleZeroBubbleV(problem, *times, deferLimit);
    case runtime::Schedule::DualPipeV:
      return scheduleDualPipeV(problem, *times, deferLimit, deferral);
    }
    return llvm::createStringError("unknown schedule " +
                                   std::to_string(static_cast<int>(schedule)));
  }();
  if (!whole || !splitBackward || runtime::isZeroBubble(schedule))
    return whole;
  return sched::splitBackward(problem, *whole, *times, deferLimit);
}
