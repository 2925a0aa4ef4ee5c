//===- Problems.cpp - scheduling problems, independent of any IR ----------===//

#include "scheduling/Problems.h"

#include <algorithm>
#include <cmath>
#include <deque>

using namespace conduit::sched;

//===----------------------------------------------------------------------===//
// Partitioning
//===----------------------------------------------------------------------===//

Violation PartitionProblem::check() const {
  if (numStages < 1)
    return "the number of stages must be positive, got " + std::to_string(numStages);
  if (tailLayers < 0 || tailLayers > static_cast<int64_t>(layerCosts.size()))
    return "a tail of " + std::to_string(tailLayers) + " layers does not lie in a chain of " +
           std::to_string(layerCosts.size());
  if (static_cast<int64_t>(layerCosts.size()) < numStages)
    return std::to_string(numStages) + " stages but only " + std::to_string(layerCosts.size()) +
           " layers; every stage needs at least one layer";
  if (cuttableLayers() < numStages)
    return std::to_string(numStages) + " stages but only " + std::to_string(cuttableLayers()) +
           " layers to cut between, the last " + std::to_string(tailLayers) +
           " staying together on the last stage; every stage needs at least one layer";
  for (size_t i = 0; i < layerCosts.size(); ++i)
    if (!std::isfinite(layerCosts[i]) || layerCosts[i] < 0)
      return "layer " + std::to_string(i) + " has an invalid cost";
  return std::nullopt;
}

Violation conduit::sched::verifyPartitionShape(const PartitionProblem &problem,
                                               const Partition &partition) {
  if (partition.numStages() != problem.numStages)
    return "the partition has " + std::to_string(partition.numStages()) + " stages, expected " +
           std::to_string(problem.numStages);
  if (partition.bounds.front() != 0 ||
      partition.bounds.back() != static_cast<int64_t>(problem.layerCosts.size()))
    return "the partition does not cover the layer chain";
  for (int64_t s = 0; s < partition.numStages(); ++s)
    if (partition.bounds[s + 1] <= partition.bounds[s])
      return "stage " + std::to_string(s) + " is empty";
  if (problem.tailLayers > 1 && partition.numStages() >= 1 &&
      partition.bounds[partition.numStages() - 1] > problem.cuttableLayers() - 1)
    return "the last " + std::to_string(problem.tailLayers) +
           " layers are not together on the last stage";
  return std::nullopt;
}

Violation conduit::sched::verifyPartition(const PartitionProblem &problem,
                                          const Partition &partition) {
  if (Violation v = problem.check())
    return v;
  return verifyPartitionShape(problem, partition);
}

double conduit::sched::stageCost(const PartitionProblem &problem, const Partition &partition,
                                 int64_t s) {
  double cost = 0;
  for (int64_t l = partition.bounds[s]; l < partition.bounds[s + 1]; ++l)
    cost += problem.layerCosts[l];
  return cost;
}

double conduit::sched::maxStageCost(const PartitionProblem &problem, const Partition &partition) {
  double worst = 0;
  for (int64_t s = 0; s < partition.numStages(); ++s)
    worst = std::max(worst, stageCost(problem, partition, s));
  return worst;
}

//===----------------------------------------------------------------------===//
// ScheduleProblem
//===----------------------------------------------------------------------===//

ScheduleProblem::ScheduleProblem(int64_t numRanks, std::vector<int64_t> stageRank,
                                 std::vector<std::vector<int64_t>> boundaries)
    : ranks(numRanks), rankOf(std::move(stageRank)), bounds(std::move(boundaries)) {
  stagesOf.resize(std::max<int64_t>(ranks, 0));
  for (int64_t s = 0; s < numStages(); ++s)
    if (rankOf[s] >= 0 && rankOf[s] < ranks)
      stagesOf[rankOf[s]].push_back(s);
  // Overlaps with the neighbour stages, by one sweep per pair, when the boundaries are sane
  // (check() reports the rest); overlapping() falls back to binary searches otherwise.
  auto sane = [&](const std::vector<int64_t> &b) {
    return b.size() >= 2 && b.front() == 0 && b.back() == bounds.front().back() &&
           std::is_sorted(b.begin(), b.end());
  };
  if (bounds.empty() || !std::all_of(bounds.begin(), bounds.end(), sane))
    return;
  auto sweep = [&](int64_t s, int64_t other) {
    const std::vector<int64_t> &mine = bounds[s], &theirs = bounds[other];
    std::vector<std::pair<int64_t, int64_t>> out(mine.size() - 1);
    size_t first = 0, last = 0;
    for (size_t m = 0; m + 1 < mine.size(); ++m) {
      while (first + 1 < theirs.size() && theirs[first + 1] <= mine[m])
        ++first;
      while (last < theirs.size() && theirs[last] < mine[m + 1])
        ++last;
      out[m] = {static_cast<int64_t>(first), static_cast<int64_t>(last)};
    }
    return out;
  };
  below.resize(numStages());
  above.resize(numStages());
  for (int64_t s = 0; s < numStages(); ++s) {
    if (s > 0)
      below[s] = sweep(s, s - 1);
    if (s + 1 < numStages())
      above[s] = sweep(s, s + 1);
  }
}

Violation ScheduleProblem::check() const {
  if (ranks < 1)
    return "the number of ranks must be positive";
  if (rankOf.empty())
    return "there are no stages";
  if (bounds.size() != rankOf.size())
    return "every stage needs micro-batch boundaries";
  for (int64_t s = 0; s < numStages(); ++s)
    if (rankOf[s] < 0 || rankOf[s] >= ranks)
      return "stage " + std::to_string(s) + " is placed on rank " + std::to_string(rankOf[s]) +
             ", outside the " + std::to_string(ranks) + " ranks";
  for (int64_t r = 0; r < ranks; ++r)
    if (stagesOf[r].empty())
      return "rank " + std::to_string(r) + " has no stage";
  for (int64_t s = 0; s < numStages(); ++s) {
    const std::vector<int64_t> &b = bounds[s];
    if (b.size() < 2 || b.front() != 0)
      return "stage " + std::to_string(s) + " needs boundaries starting at sample 0";
    for (size_t j = 1; j < b.size(); ++j)
      if (b[j] <= b[j - 1])
        return "the micro-batch boundaries of stage " + std::to_string(s) +
               " do not increase strictly";
    if (b.back() != bounds.front().back())
      return "stage " + std::to_string(s) + " cuts " + std::to_string(b.back()) +
             " samples but stage 0 cuts " + std::to_string(bounds.front().back());
  }
  return std::nullopt;
}

bool ScheduleProblem::equalPartitions() const {
  return std::all_of(bounds.begin(), bounds.end(),
                     [&](const std::vector<int64_t> &b) { return b == bounds.front(); });
}

std::pair<int64_t, int64_t> ScheduleProblem::overlapping(int64_t s, int64_t m,
                                                         int64_t other) const {
  if (other == s - 1 && !below.empty())
    return below[s][m];
  if (other == s + 1 && !above.empty())
    return above[s][m];
  const std::vector<int64_t> &b = bounds[other];
  // First micro-batch of `other` ending after begin, one past the last starting before end.
  int64_t first = std::upper_bound(b.begin(), b.end(), begin(s, m)) - b.begin() - 1;
  int64_t last = std::lower_bound(b.begin(), b.end(), end(s, m)) - b.begin();
  return {first, last};
}

//===----------------------------------------------------------------------===//
// Schedule constraints
//===----------------------------------------------------------------------===//

std::string conduit::sched::describe(const Action &action) {
  static const char kLetter[] = {'F', 'B', 'I', 'W'};
  return std::string(1, kLetter[static_cast<int>(action.kind)]) + " s" +
         std::to_string(action.stage) + " mb" + std::to_string(action.mb);
}

bool Schedule::startsPair(int64_t r, size_t i) const {
  if (r >= static_cast<int64_t>(pairs.size()))
    return false;
  const std::vector<int32_t> &list = pairs[r];
  return std::binary_search(list.begin(), list.end(), static_cast<int32_t>(i));
}

namespace {

/// Flat index of (stage, micro-batch) pairs, for per-action bookkeeping.
class ActionIndex {
public:
  explicit ActionIndex(const ScheduleProblem &problem) {
    offsets.reserve(problem.numStages() + 1);
    offsets.push_back(0);
    for (int64_t s = 0; s < problem.numStages(); ++s)
      offsets.push_back(offsets.back() + problem.numMicrobatches(s));
  }
  int64_t size() const { return offsets.back(); }
  int64_t operator()(int64_t stage, int64_t mb) const { return offsets[stage] + mb; }

private:
  std::vector<int64_t> offsets;
};

bool inRange(const ScheduleProblem &problem, const Action &a) {
  return a.stage >= 0 && a.stage < problem.numStages() && a.mb >= 0 &&
         a.mb < problem.numMicrobatches(a.stage);
}

std::string rankRuns(int64_t r, const Action &a) {
  return "rank " + std::to_string(r) + " runs " + describe(a);
}

/// Per (stage, micro-batch), which of its actions have been seen, one bit per kind.
struct Seen {
  explicit Seen(const ActionIndex &index) : index(index), bits(index.size()) {}
  bool has(ActionKind kind, int64_t stage, int64_t mb) const {
    return bits[index(stage, mb)] & bit(kind);
  }
  bool hasInputGradient(int64_t stage, int64_t mb) const {
    return has(ActionKind::Backward, stage, mb) || has(ActionKind::BackwardInput, stage, mb);
  }
  void add(const Action &a) { bits[index(a.stage, a.mb)] |= bit(a.kind); }
  static uint8_t bit(ActionKind kind) { return uint8_t(1) << static_cast<int>(kind); }

  const ActionIndex &index;
  std::vector<uint8_t> bits;
};

} // namespace

Violation conduit::sched::verifyCompleteness(const ScheduleProblem &problem,
                                             const Schedule &schedule) {
  if (static_cast<int64_t>(schedule.ranks.size()) != problem.numRanks())
    return "the schedule has " + std::to_string(schedule.ranks.size()) + " ranks, expected " +
           std::to_string(problem.numRanks());
  ActionIndex index(problem);
  Seen seen(index);
  for (int64_t r = 0; r < problem.numRanks(); ++r) {
    for (const Action &a : schedule.ranks[r]) {
      if (!inRange(problem, a))
        return "rank " + std::to_string(r) + " has " + describe(a) + ", which does not exist";
      if (problem.rankOfStage(a.stage) != r)
        return rankRuns(r, a) + " but stage " + std::to_string(a.stage) + " is placed on rank " +
               std::to_string(problem.rankOfStage(a.stage));
      if (seen.has(a.kind, a.stage, a.mb))
        return describe(a) + " appears twice";
      seen.add(a);
    }
  }
  for (int32_t s = 0; s < problem.numStages(); ++s)
    for (int32_t m = 0; m < problem.numMicrobatches(s); ++m) {
      auto missing = [&](ActionKind kind) { return describe({kind, s, m}) + " is missing"; };
      if (!seen.has(ActionKind::Forward, s, m))
        return missing(ActionKind::Forward);
      bool whole = seen.has(ActionKind::Backward, s, m);
      bool input = seen.has(ActionKind::BackwardInput, s, m);
      bool weight = seen.has(ActionKind::BackwardWeight, s, m);
      if (whole && (input || weight))
        return describe({ActionKind::Backward, s, m}) + " is both whole and split";
      if (!whole && !input)
        return missing(weight ? ActionKind::BackwardInput : ActionKind::Backward);
      if (input && !weight)
        return missing(ActionKind::BackwardWeight);
    }
  return std::nullopt;
}

Violation conduit::sched::verifyLocalOrder(const ScheduleProblem &problem,
                                           const Schedule &schedule) {
  ActionIndex index(problem);
  Seen done(index);
  for (int64_t r = 0; r < static_cast<int64_t>(schedule.ranks.size()); ++r) {
    const std::vector<Action> &list = schedule.ranks[r];
    if (r < static_cast<int64_t>(schedule.pairs.size())) {
      int64_t previous = -2;
      for (int32_t i : schedule.pairs[r]) {
        if (i <= previous + 1 || i < 0 || static_cast<size_t>(i) + 1 >= list.size())
          return "rank " + std::to_string(r) + " has a pair at position " + std::to_string(i) +
                 " that is out of order, overlaps another or has no second action";
        if (list[i].kind != ActionKind::Forward || !producesInputGradient(list[i + 1].kind))
          return "rank " + std::to_string(r) + " pairs " + describe(list[i]) + " with " +
                 describe(list[i + 1]) + "; a pair is a forward and then a backward";
        previous = i;
      }
    }
    for (const Action &a : list) {
      if (!inRange(problem, a))
        continue; // reported by verifyCompleteness
      switch (a.kind) {
      case ActionKind::Forward:
        // A same-rank upstream stage must have produced the input already.
        if (a.stage > 0 && problem.rankOfStage(a.stage - 1) == r) {
          auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage - 1);
          for (int64_t i = first; i < last; ++i)
            if (!done.has(ActionKind::Forward, a.stage - 1, i))
              return rankRuns(r, a) + " before " +
                     describe({ActionKind::Forward, a.stage - 1, int32_t(i)});
        }
        break;
      case ActionKind::Backward:
      case ActionKind::BackwardInput:
        if (!done.has(ActionKind::Forward, a.stage, a.mb))
          return rankRuns(r, a) + " before its forward";
        if (a.stage + 1 < problem.numStages() && problem.rankOfStage(a.stage + 1) == r) {
          auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage + 1);
          for (int64_t j = first; j < last; ++j)
            if (!done.hasInputGradient(a.stage + 1, j))
              return rankRuns(r, a) + " before the backward of stage " +
                     std::to_string(a.stage + 1) + " mb" + std::to_string(j);
        }
        break;
      case ActionKind::BackwardWeight:
        if (!done.has(ActionKind::BackwardInput, a.stage, a.mb))
          return rankRuns(r, a) + " before its input gradient";
        break;
      }
      done.add(a);
    }
  }
  return std::nullopt;
}

namespace {

/// Runs every rank's list as far as its dependencies allow (a pair as one step that needs both
/// actions' inputs and delivers both outputs at its end) and returns, per rank, the position
/// it stops at: the list's size where it completes (an action out of range stops it too).
std::vector<size_t> runAsFarAsPossible(const ScheduleProblem &problem, const Schedule &schedule) {
  ActionIndex index(problem);
  Seen done(index);
  // The one rank (if any) blocked on each action: F(s, i) is awaited only by the rank of
  // stage s+1, B or I(s, j) only by the rank of stage s-1.
  std::vector<int32_t> forwardWaiter(index.size(), -1), backwardWaiter(index.size(), -1);
  std::vector<size_t> next(schedule.ranks.size(), 0);
  std::deque<int64_t> runnable;
  for (int64_t r = 0; r < static_cast<int64_t>(schedule.ranks.size()); ++r)
    runnable.push_back(r);

  // Returns true if `a` can run; otherwise registers rank r as waiting on the first missing
  // dependency and returns false.
  auto ready = [&](const Action &a, int64_t r) {
    if (a.kind == ActionKind::Forward) {
      if (a.stage == 0)
        return true;
      auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage - 1);
      for (int64_t i = first; i < last; ++i)
        if (!done.has(ActionKind::Forward, a.stage - 1, i)) {
          forwardWaiter[index(a.stage - 1, i)] = static_cast<int32_t>(r);
          return false;
        }
      return true;
    }
    // Same-rank prerequisites not done mean the order itself is wrong: the rank stays blocked.
    if (a.kind == ActionKind::BackwardWeight)
      return done.has(ActionKind::BackwardInput, a.stage, a.mb);
    if (!done.has(ActionKind::Forward, a.stage, a.mb))
      return false;
    if (a.stage + 1 == problem.numStages())
      return true;
    auto [first, last] = problem.overlapping(a.stage, a.mb, a.stage + 1);
    for (int64_t j = first; j < last; ++j)
      if (!done.hasInputGradient(a.stage + 1, j)) {
        backwardWaiter[index(a.stage + 1, j)] = static_cast<int32_t>(r);
        return false;
      }
    return true;
  };
  auto finish = [&](const Action &a) {
    done.add(a);
    if (a.kind == ActionKind::BackwardWeight)
      return;
    int32_t &waiter =
        (a.kind == ActionKind::Forward ? forwardWaiter : backwardWaiter)[index(a.stage, a.mb)];
    if (waiter >= 0) {
      runnable.push_back(waiter);
      waiter = -1;
    }
  };

  while (!runnable.empty()) {
    int64_t r = runnable.front();
    runnable.pop_front();
    const std::vector<Action> &list = schedule.ranks[r];
    while (next[r] < list.size()) {
      const Action &a = list[next[r]];
      if (!inRange(problem, a) || !ready(a, r))
        break;
      if (!schedule.startsPair(r, next[r])) {
        finish(a);
        ++next[r];
        continue;
      }
      // A pair starts when the inputs of both its actions are there (the second may use the
      // first's result on this rank) and delivers both outputs when it ends.
      const Action &second = list[next[r] + 1];
      done.add(a);
      bool secondReady = inRange(problem, second) && ready(second, r);
      done.bits[index(a.stage, a.mb)] &= ~Seen::bit(a.kind);
      if (!secondReady)
        break;
      finish(a);
      finish(second);
      next[r] += 2;
    }
  }
  return next;
}

} // namespace

Violation conduit::sched::verifyExecutable(const ScheduleProblem &problem,
                                           const Schedule &schedule) {
  const std::vector<size_t> next = runAsFarAsPossible(problem, schedule);
  std::string blocked;
  for (size_t r = 0; r < schedule.ranks.size(); ++r)
    if (next[r] < schedule.ranks[r].size())
      blocked += (blocked.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) +
                 " at action " + std::to_string(next[r]) + " (" +
                 describe(schedule.ranks[r][next[r]]) + ")";
  if (!blocked.empty())
    return "the schedule cannot complete; blocked: " + blocked;
  return std::nullopt;
}

void conduit::sched::pairForwardsWithBackwards(const ScheduleProblem &problem, Schedule &schedule) {
  schedule.pairs.assign(schedule.ranks.size(), {});
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    const std::vector<Action> &list = schedule.ranks[r];
    for (size_t i = 0; i + 1 < list.size(); ++i)
      if (list[i].kind == ActionKind::Forward && producesInputGradient(list[i + 1].kind) &&
          list[i + 1].mb != list[i].mb) {
        schedule.pairs[r].push_back(static_cast<int32_t>(i));
        ++i; // a pair's backward starts no pair
      }
  }
  // A pair sends its forward's output only when its backward is done. Where that backward
  // waits, through the other ranks, on this very output (the last forwards of an interleaved
  // order with M = P, say), the ranks stop at such pairs: run them unpaired, until nothing
  // stops at a pair. Each round drops at least one pair.
  for (bool dropped = true; dropped;) {
    dropped = false;
    const std::vector<size_t> next = runAsFarAsPossible(problem, schedule);
    for (size_t r = 0; r < schedule.ranks.size(); ++r) {
      std::vector<int32_t> &pairs = schedule.pairs[r];
      auto at = std::lower_bound(pairs.begin(), pairs.end(), static_cast<int32_t>(next[r]));
      if (at != pairs.end() && *at == static_cast<int32_t>(next[r])) {
        pairs.erase(at);
        dropped = true;
      }
    }
  }
}

Violation conduit::sched::verifySchedule(const ScheduleProblem &problem, const Schedule &schedule) {
  if (Violation v = problem.check())
    return v;
  if (Violation v = verifyCompleteness(problem, schedule))
    return v;
  if (Violation v = verifyLocalOrder(problem, schedule))
    return v;
  return verifyExecutable(problem, schedule);
}
