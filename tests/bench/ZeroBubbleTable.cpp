//===- ZeroBubbleTable.cpp - unit-cost figures of every schedule ---------===//
//
// Prints, as a Markdown table, the compute-only makespan of every schedule with unit costs
// (F = I = W = 1 per stage and micro-batch, B = I + W, free communication) against the bound no
// rank can beat (M·V·3 + P - 1), and the most (stage, micro-batch) pairs a rank keeps between
// F and B or I ("in flight") and between F and W ("held"), for P in {2, 4, 8} and M in
// {P, 2P, 4P}. docs/results.md quotes it:
//
//   build/bin/zero_bubble_table
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

#include <algorithm>
#include <cstdio>
#include <functional>

using namespace conduit::sched;

namespace {

struct Row {
  const char *name;
  int64_t v;
  Placement placement;
  std::function<llvm::Expected<Schedule>(const ScheduleProblem &, const ActionTimes &)> build;
};

} // namespace

int main() {
  const Row rows[] = {
      {"1f1b", 1, Placement::Loop,
       [](const ScheduleProblem &p, const ActionTimes &) { return scheduleOneFOneB(p); }},
      {"zb-h1", 1, Placement::Loop,
       [](const ScheduleProblem &p, const ActionTimes &t) { return scheduleZeroBubbleH1(p, t); }},
      {"depth-first", 2, Placement::Loop,
       [](const ScheduleProblem &p, const ActionTimes &) { return scheduleDepthFirst(p, 0); }},
      {"interleaved-zb", 2, Placement::Loop,
       [](const ScheduleProblem &p, const ActionTimes &t) {
         return scheduleInterleavedZeroBubble(p, 0, t);
       }},
      {"breadth-first", 2, Placement::Loop,
       [](const ScheduleProblem &p, const ActionTimes &) { return scheduleBreadthFirst(p); }},
      {"breadth-first, split backward", 2, Placement::Loop,
       [](const ScheduleProblem &p, const ActionTimes &t) -> llvm::Expected<Schedule> {
         llvm::Expected<Schedule> whole = scheduleBreadthFirst(p);
         if (!whole)
           return whole.takeError();
         return splitBackward(p, *whole, t);
       }},
      {"zbv", 2, Placement::V,
       [](const ScheduleProblem &p, const ActionTimes &t) { return scheduleZeroBubbleV(p, t); }},
      {"dualpipev", 2, Placement::V,
       [](const ScheduleProblem &p, const ActionTimes &t) { return scheduleDualPipeV(p, t); }},
  };
  std::printf("| schedule | P | V | M | makespan | bound | in flight (max rank) | held (max "
              "rank) |\n|---|---|---|---|---|---|---|---|\n");
  for (const Row &row : rows)
    for (int64_t p : {2, 4, 8})
      for (int64_t m : {p, 2 * p, 4 * p}) {
        ScheduleProblem problem(
            p, llvm::cantFail(placeStages(p * row.v, p, row.placement)),
            std::vector<std::vector<int64_t>>(p * row.v, equalBoundaries(m, 1)));
        ActionTimes times = ActionTimes::perSample(problem, 1, 1, 1);
        llvm::Expected<Schedule> schedule = row.build(problem, times);
        if (!schedule) {
          std::printf("| %s | %lld | %lld | %lld | refused: %s | | | |\n", row.name, (long long)p,
                      (long long)row.v, (long long)m, llvm::toString(schedule.takeError()).c_str());
          continue;
        }
        if (Violation v = verifySchedule(problem, *schedule)) {
          std::fprintf(stderr, "%s does not verify: %s\n", row.name, v->c_str());
          return 1;
        }
        int64_t inFlight = 0, held = 0;
        for (int64_t r = 0; r < p; ++r) {
          inFlight = std::max(inFlight, peakInFlight(*schedule, r));
          held = std::max(held, peakHeld(*schedule, r));
        }
        std::printf("| %s | %lld | %lld | %lld | %.0f | %lld | %lld | %lld |\n", row.name,
                    (long long)p, (long long)row.v, (long long)m,
                    simulateCompute(problem, *schedule, times).makespan,
                    (long long)(3 * m * row.v + p - 1), (long long)inFlight, (long long)held);
      }
  return 0;
}
