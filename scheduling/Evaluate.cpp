//===- Evaluate.cpp - compute-only execution of a schedule ----------------===//
//
// Every action starts at the later of its rank becoming free and its dependencies finishing;
// communication is free. This is the textbook model behind the bubble formulas, and it is
// what the partition and micro-batch searches evaluate before the full simulator adds streams
// and communication.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

#include <algorithm>
#include <deque>

using namespace conduit::sched;

ActionTimes ActionTimes::perSample(const ScheduleProblem &problem, double tf, double tb) {
  ActionTimes times;
  times.forward.resize(problem.numStages());
  times.backward.resize(problem.numStages());
  for (int64_t s = 0; s < problem.numStages(); ++s)
    for (int64_t m = 0; m < problem.numMicrobatches(s); ++m) {
      double samples = static_cast<double>(problem.end(s, m) - problem.begin(s, m));
      times.forward[s].push_back(tf * samples);
      times.backward[s].push_back(tb * samples);
    }
  return times;
}

Timeline conduit::sched::simulateCompute(const ScheduleProblem &problem, const Schedule &schedule,
                                         const ActionTimes &times) {
  const int64_t stages = problem.numStages();
  std::vector<std::vector<double>> forwardEnd(stages), backwardEnd(stages);
  for (int64_t s = 0; s < stages; ++s) {
    forwardEnd[s].assign(problem.numMicrobatches(s), -1);
    backwardEnd[s].assign(problem.numMicrobatches(s), -1);
  }
  const int64_t ranks = problem.numRanks();
  Timeline timeline;
  timeline.busy.assign(ranks, 0);
  timeline.start.resize(ranks);
  timeline.finish.resize(ranks);
  timeline.sequence.resize(ranks);
  int64_t sequence = 0;
  std::vector<double> free(ranks, 0);
  std::vector<size_t> next(ranks, 0);

  // Earliest start from dependencies, or -1 if one has not run yet.
  auto dependenciesDone = [&](const Action &a) -> double {
    double ready = 0;
    auto wait = [&](const std::vector<double> &ends, int64_t first, int64_t last) {
      for (int64_t i = first; i < last && ready >= 0; ++i)
        ready = ends[i] < 0 ? -1 : std::max(ready, ends[i]);
    };
    if (a.kind == ActionKind::Forward) {
      if (a.stage > 0) {
        auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage - 1);
        wait(forwardEnd[a.stage - 1], first, last);
      }
      return ready;
    }
    wait(forwardEnd[a.stage], a.mb, a.mb + 1);
    if (a.stage + 1 < stages) {
      auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage + 1);
      wait(backwardEnd[a.stage + 1], first, last);
    }
    return ready;
  };

  // Sweep the ranks until none advances; a verified schedule always completes.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < ranks; ++r) {
      const std::vector<Action> &list = schedule.ranks[r];
      while (next[r] < list.size()) {
        const Action &a = list[next[r]];
        double ready = dependenciesDone(a);
        if (ready < 0)
          break;
        double duration =
            (a.kind == ActionKind::Forward ? times.forward : times.backward)[a.stage][a.mb];
        double start = std::max(ready, free[r]);
        free[r] = start + duration;
        (a.kind == ActionKind::Forward ? forwardEnd : backwardEnd)[a.stage][a.mb] = free[r];
        timeline.start[r].push_back(start);
        timeline.finish[r].push_back(free[r]);
        timeline.sequence[r].push_back(sequence++);
        timeline.busy[r] += duration;
        ++next[r];
        progress = true;
      }
    }
  }
  for (int64_t r = 0; r < ranks; ++r)
    timeline.makespan = std::max(timeline.makespan, free[r]);
  return timeline;
}

int64_t conduit::sched::peakInFlight(const Schedule &schedule, int64_t rank) {
  int64_t current = 0, peak = 0;
  for (const Action &a : schedule.ranks[rank]) {
    current += a.kind == ActionKind::Forward ? 1 : -1;
    peak = std::max(peak, current);
  }
  return peak;
}
