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

ActionTimes ActionTimes::perSample(const ScheduleProblem &problem, double tf, double ti,
                                   double tw) {
  ActionTimes times;
  for (auto *table : {&times.forward, &times.backward, &times.input, &times.weight})
    table->resize(problem.numStages());
  for (int64_t s = 0; s < problem.numStages(); ++s)
    for (int64_t m = 0; m < problem.numMicrobatches(s); ++m) {
      double samples = static_cast<double>(problem.end(s, m) - problem.begin(s, m));
      times.forward[s].push_back(tf * samples);
      times.backward[s].push_back((ti + tw) * samples);
      times.input[s].push_back(ti * samples);
      times.weight[s].push_back(tw * samples);
    }
  return times;
}

double ActionTimes::of(const Action &a) const { return slot(a); }

const double &ActionTimes::slot(const Action &a) const {
  switch (a.kind) {
  case ActionKind::Backward:
    return backward[a.stage][a.mb];
  case ActionKind::BackwardInput:
    return input[a.stage][a.mb];
  case ActionKind::BackwardWeight:
    return weight[a.stage][a.mb];
  case ActionKind::Forward:
    break;
  }
  return forward[a.stage][a.mb];
}

Timeline conduit::sched::simulateCompute(const ScheduleProblem &problem, const Schedule &schedule,
                                         const ActionTimes &times, const TransferDelays &delays) {
  const int64_t stages = problem.numStages();
  // When each forward and each input gradient (B or I) became available to the neighbours,
  // and when each I finished on its own rank (for its W); -1 while not run. Stage s's
  // micro-batches from offset[s] on.
  std::vector<int64_t> offset(stages + 1, 0);
  for (int64_t s = 0; s < stages; ++s)
    offset[s + 1] = offset[s] + problem.numMicrobatches(s);
  std::vector<double> forwardEnd(offset[stages], -1), backwardEnd(offset[stages], -1),
      inputEnd(offset[stages], -1);
  auto slice = [&](std::vector<double> &ends, int64_t stage) {
    return ends.data() + offset[stage];
  };
  const int64_t ranks = problem.numRanks();
  Timeline timeline;
  timeline.busy.assign(ranks, 0);
  timeline.start.resize(ranks);
  timeline.finish.resize(ranks);
  timeline.available.resize(ranks);
  timeline.sequence.resize(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    const size_t n = schedule.ranks[r].size();
    timeline.start[r].reserve(n);
    timeline.finish[r].reserve(n);
    timeline.available[r].reserve(n);
    timeline.sequence[r].reserve(n);
  }
  int64_t sequence = 0;
  std::vector<double> free(ranks, 0);
  std::vector<size_t> next(ranks, 0);

  // Earliest start from dependencies, or -1 if one has not run yet. `local` is a same-rank
  // result the action may use although its neighbours do not see it yet (a pair's first).
  auto dependenciesDone = [&](const Action &a, const Action *local) -> double {
    double ready = 0;
    auto wait = [&](const double *ends, int64_t first, int64_t last, double delay = 0) {
      for (int64_t i = first; i < last && ready >= 0; ++i)
        ready = ends[i] < 0 ? -1 : std::max(ready, ends[i] + delay);
    };
    switch (a.kind) {
    case ActionKind::Forward:
      if (a.stage > 0) {
        auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage - 1);
        wait(slice(forwardEnd, a.stage - 1), first, last,
             delays.forward.empty() ? 0 : delays.forward[a.stage - 1]);
      }
      return ready;
    case ActionKind::BackwardWeight:
      wait(slice(inputEnd, a.stage), a.mb, a.mb + 1);
      return ready;
    case ActionKind::Backward:
    case ActionKind::BackwardInput:
      if (!(local && local->stage == a.stage && local->mb == a.mb))
        wait(slice(forwardEnd, a.stage), a.mb, a.mb + 1);
      if (a.stage + 1 < stages) {
        auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage + 1);
        wait(slice(backwardEnd, a.stage + 1), first, last,
             delays.backward.empty() ? 0 : delays.backward[a.stage + 1]);
      }
      return ready;
    }
    return ready;
  };
  auto record = [&](int64_t r, const Action &a, double start, double end, double visible) {
    if (a.kind == ActionKind::Forward)
      slice(forwardEnd, a.stage)[a.mb] = visible;
    else if (producesInputGradient(a.kind))
      slice(backwardEnd, a.stage)[a.mb] = visible;
    if (a.kind == ActionKind::BackwardInput)
      slice(inputEnd, a.stage)[a.mb] = end;
    timeline.start[r].push_back(start);
    timeline.finish[r].push_back(end);
    timeline.available[r].push_back(visible);
    timeline.sequence[r].push_back(sequence++);
    timeline.busy[r] += end - start;
  };

  // Sweep the ranks until none advances; a verified schedule always completes.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t r = 0; r < ranks; ++r) {
      const std::vector<Action> &list = schedule.ranks[r];
      while (next[r] < list.size()) {
        const Action &a = list[next[r]];
        double ready = dependenciesDone(a, nullptr);
        if (ready < 0)
          break;
        if (!schedule.startsPair(r, next[r])) {
          double start = std::max(ready, free[r]);
          free[r] = start + times.of(a);
          record(r, a, start, free[r], free[r]);
          ++next[r];
          progress = true;
          continue;
        }
        // A pair: both inputs first, the two computations back to back, both outputs at the
        // end.
        const Action &second = list[next[r] + 1];
        double secondReady = dependenciesDone(second, &a);
        if (secondReady < 0)
          break;
        double start = std::max({ready, secondReady, free[r]});
        double middle = start + times.of(a);
        free[r] = middle + times.of(second);
        record(r, a, start, middle, free[r]);
        record(r, second, middle, free[r], free[r]);
        next[r] += 2;
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
    if (a.kind == ActionKind::Forward)
      ++current;
    else if (producesInputGradient(a.kind))
      --current;
    peak = std::max(peak, current);
  }
  return peak;
}

int64_t conduit::sched::peakHeld(const Schedule &schedule, int64_t rank) {
  int64_t current = 0, peak = 0;
  for (const Action &a : schedule.ranks[rank]) {
    if (a.kind == ActionKind::Forward)
      ++current;
    else if (a.kind != ActionKind::BackwardInput)
      --current;
    peak = std::max(peak, current);
  }
  return peak;
}
