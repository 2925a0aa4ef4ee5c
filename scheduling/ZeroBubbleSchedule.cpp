//===- ZeroBubbleSchedule.cpp - split backward and the zero-bubble family -===//
//
// Zero Bubble Pipeline Parallelism (Qi et al., ICLR 2024) splits each backward into the input
// gradient I, on the critical path to the previous stage, and the weight gradient W, which
// nothing but the stage's gradient reduction waits for. Two constructions here:
//
// * splitBackward keeps the order of a schedule's forwards and backwards (each B becomes an I)
//   and lets the Ws fill the time the rank would otherwise wait. ZB-H1 is 1F1B split this way
//   and interleaved zero-bubble is depth-first split this way.
// * The V schedules (ZB-V, DualPipeV) are list schedules on the V placement: a free rank runs
//   the ready I of its oldest micro-batch, else a ready forward of its later stage first while
//   under the memory bound, else its oldest deferred W.
//
// Both decide by simulating the rank lists with the given action times, so the order they
// return is an order the simulation ran: every action after its dependencies, hence
// executable. Memory bounds are counts of (stage, micro-batch) pairs per rank: "in flight"
// between F and I (or B), "held" between F and W (or B), which is in flight plus deferred Ws.
// A limit on the deferred Ws themselves (`deferLimit`: P unless the caller says otherwise, see
// Schedulers.h) bounds what they keep: with that many waiting the oldest runs before another
// I, and with a limit of 0 each W runs right after its I. DualPipeV may also defer none before
// a rank's last forward, as DualPipe does (Deferral::Cooldown): then, where every stage cuts
// the batch alike into at least 2P micro-batches, it is DualPipe's own fixed order rather
// than a list (dualPipeOrder below).
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedulers.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>

using namespace conduit::sched;

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

/// The state of a simulation that builds rank lists action by action.
class ListBuilder {
public:
  ListBuilder(const ScheduleProblem &problem, const ActionTimes &times)
      : problem(problem), times(times), ranks(problem.numRanks()), free(ranks, 0),
        inFlight(ranks, 0), held(ranks, 0), pending(ranks) {
    for (auto *table : {&forwardEnd, &inputEnd}) {
      table->resize(problem.numStages());
      for (int64_t s = 0; s < problem.numStages(); ++s)
        (*table)[s].assign(problem.numMicrobatches(s), kNever);
    }
    schedule.ranks.resize(ranks);
    schedule.pairs.resize(ranks);
    for (int64_t s = 0; s < problem.numStages(); ++s)
      remaining += 3 * problem.numMicrobatches(s);
  }

  /// Whether the inputs of F(s, m) are there at `now`.
  bool forwardReady(int64_t s, int64_t m, double now) const {
    if (s == 0)
      return true;
    auto [first, last] = problem.overlapping(s, m, s - 1);
    for (int64_t i = first; i < last; ++i)
      if (forwardEnd[s - 1][i] > now)
        return false;
    return true;
  }
  /// Whether the inputs of I(s, m) are there at `now`.
  bool inputReady(int64_t s, int64_t m, double now) const {
    if (forwardEnd[s][m] > now)
      return false;
    if (s + 1 == problem.numStages())
      return true;
    auto [first, last] = problem.overlapping(s, m, s + 1);
    for (int64_t j = first; j < last; ++j)
      if (inputEnd[s + 1][j] > now)
        return false;
    return true;
  }

  /// Runs `actions` (one, or a pair) back to back on rank r from `now`; their results become
  /// visible when the last ends.
  void run(int64_t r, std::initializer_list<Action> actions, double now) {
    if (actions.size() == 2)
      schedule.pairs[r].push_back(static_cast<int32_t>(schedule.ranks[r].size()));
    double end = now;
    for (const Action &a : actions)
      end += times.of(a);
    for (const Action &a : actions) {
      schedule.ranks[r].push_back(a);
      --remaining;
      switch (a.kind) {
      case ActionKind::Forward:
        forwardEnd[a.stage][a.mb] = end;
        ++inFlight[r];
        ++held[r];
        break;
      case ActionKind::BackwardInput:
        inputEnd[a.stage][a.mb] = end;
        --inFlight[r];
        pending[r].push_back({ActionKind::BackwardWeight, a.stage, a.mb});
        break;
      case ActionKind::BackwardWeight:
        --held[r];
        break;
      case ActionKind::Backward:
        break; // not produced here
      }
    }
    free[r] = end;
    instant = instant || end == now;
  }
  /// Whether rank r defers more weight gradients than `limit`, or as many and is about to
  /// start another input gradient: then its oldest W goes first.
  bool overLimit(int64_t r, int64_t limit, bool beforeInput) const {
    const int64_t waiting = static_cast<int64_t>(pending[r].size());
    return waiting > limit || (beforeInput && waiting >= limit);
  }
  /// Runs rank r's oldest deferred W, if any.
  bool runWeight(int64_t r, double now) {
    if (pending[r].empty())
      return false;
    Action w = pending[r].front();
    pending[r].pop_front();
    run(r, {w}, now);
    return true;
  }

  /// Drives `pick(r, now, force)` until every action ran: at each instant every free rank
  /// picks until none does, then time moves to the next end. `pick` returns whether it started
  /// something; when no rank is busy and none picked, it is called again with force = true
  /// (its memory bounds would otherwise hold every rank forever).
  template <typename Pick> void drive(Pick pick) {
    double now = 0;
    while (remaining > 0) {
      // Another sweep at the same instant only when something took no time: otherwise
      // nothing that started can have made anything else ready yet.
      bool again = true;
      while (again) {
        instant = false;
        for (int64_t r = 0; r < ranks; ++r)
          if (free[r] <= now)
            pick(r, now, false);
        again = instant;
      }
      double next = kNever;
      for (int64_t r = 0; r < ranks; ++r)
        if (free[r] > now)
          next = std::min(next, free[r]);
      if (next == kNever && remaining > 0) {
        for (int64_t r = 0; r < ranks && next == kNever; ++r)
          if (pick(r, now, true))
            next = now;
        if (next == kNever)
          return; // nothing can run: the caller's verification reports it
        continue;
      }
      now = next;
    }
  }

  const ScheduleProblem &problem;
  const ActionTimes &times;
  const int64_t ranks;
  std::vector<double> free;
  std::vector<int64_t> inFlight, held;
  std::vector<std::deque<Action>> pending;
  std::vector<std::vector<double>> forwardEnd, inputEnd;
  int64_t remaining = 0;
  bool instant = false; ///< an action of zero duration ran at this instant
  Schedule schedule;
};

llvm::Error scheduleError(const std::string &message) { return llvm::createStringError(message); }

/// The V schedules: see the file comment. `pairs`: run a ready forward together with the ready
/// I as one overlapped pair (DualPipeV); `deferLimit`: the most deferred Ws a rank keeps, from
/// its last forward on with Deferral::Cooldown (none before).
Schedule scheduleOnV(const ScheduleProblem &problem, const ActionTimes &times, int64_t cap,
                     bool pairs, int64_t limitAfterForwards, Deferral deferral) {
  ListBuilder b(problem, times);
  const int64_t stages = problem.numStages();
  std::vector<int64_t> nextForward(stages, 0), nextInput(stages, 0);
  auto forwardsLeft = [&](int64_t r) {
    const std::vector<int64_t> &local = problem.localStages(r);
    return std::any_of(local.begin(), local.end(),
                       [&](int64_t s) { return nextForward[s] < problem.numMicrobatches(s); });
  };
  b.drive([&](int64_t r, double now, bool force) {
    const int64_t deferLimit =
        deferral == Deferral::Cooldown && forwardsLeft(r) ? 0 : limitAfterForwards;
    if (b.overLimit(r, deferLimit, false) && b.runWeight(r, now))
      return true;
    // The ready I of the oldest samples (the later stage among equals), and the ready
    // forward of the latest stage.
    int64_t input = -1, forward = -1;
    for (int64_t s : problem.localStages(r)) {
      int64_t m = nextInput[s];
      if (m < problem.numMicrobatches(s) && b.inputReady(s, m, now) &&
          (input < 0 || problem.begin(s, m) <= problem.begin(input, nextInput[input])))
        input = s;
      int64_t f = nextForward[s];
      if (f < problem.numMicrobatches(s) && b.forwardReady(s, f, now))
        forward = s;
    }
    bool forwardAllowed = forward >= 0 && b.inFlight[r] < cap && b.held[r] < cap;
    auto forwardAction = [&] {
      return Action{ActionKind::Forward, int32_t(forward), int32_t(nextForward[forward]++)};
    };
    // DualPipe's steady state pairs every ready I with a forward: where only the memory held
    // for deferred weight gradients stops the forward, a deferred W runs first, so that the
    // pair can follow it.
    if (pairs && input >= 0 && forward >= 0 && !forwardAllowed && b.inFlight[r] < cap &&
        b.runWeight(r, now))
      return true;
    // DualPipe runs its steady state's backwards whole and defers weight gradients only in the
    // cool-down, rank r at most r + 1 of them (DeepSeek's dualpipev.py, steps 6 to 8), which
    // Deferral::Cooldown follows; either way, with the limit (P unless the job says) deferred,
    // the oldest W runs before another I, which would only hold more memory.
    if (input >= 0 && b.overLimit(r, deferLimit, true) && b.runWeight(r, now))
      return true;
    if (input >= 0) {
      Action i{ActionKind::BackwardInput, int32_t(input), int32_t(nextInput[input]++)};
      if (pairs && forwardAllowed)
        b.run(r, {forwardAction(), i}, now);
      else
        b.run(r, {i}, now);
      return true;
    }
    if (forwardAllowed || (force && forward >= 0)) {
      b.run(r, {forwardAction()}, now);
      return true;
    }
    return b.runWeight(r, now);
  });
  return std::move(b.schedule);
}

/// DeepSeek's own DualPipeV order (the eight steps of DualPipe's `dualpipev.py`, which
/// PyTorch's ScheduleDualPipeV writes too), where every stage cuts the batch into the same M
/// micro-batches and M >= 2P; nullopt elsewhere. It is a fixed pattern, independent of the
/// actions' times. Rank r, holding stages a = r and b = 2P-1-r, runs:
///   1. 2(P-r-1) forwards of a;
///   2. r+1 times: F a, F b;
///   3. P-r-1 times: I b and its W, F b;
///   4. M-2P+r+1 times: the pair (F a, B b), then the pair (F b, B a), except that the last
///      rank runs its first F a and B b apart;
///   5. P-r-1 times: B b, the pair (F b, B a);
///   6. r+1 times: B b, B a; from the middle step on (on an even rank, from its B a) as input
///      gradients whose Ws wait;
///   7. P-r-1 times: the oldest W, I a;
///   8. the Ws that wait, oldest first.
/// Every B is whole (an input gradient and its W at once), so no W is deferred before the
/// rank's last forward and rank r defers at most r+1 after it. With `limit` Ws waiting, an
/// input gradient runs the oldest first; with a limit of 0 the backwards of steps 6 and 7 are
/// whole too.
std::optional<Schedule> dualPipeOrder(const ScheduleProblem &problem, int64_t limit) {
  if (withoutDualPipeOrder(problem))
    return std::nullopt;
  const int64_t p = problem.numRanks(), m = problem.numMicrobatches(0);
  Schedule schedule;
  schedule.ranks.resize(p);
  schedule.pairs.resize(p);
  for (int64_t r = 0; r < p; ++r) {
    std::vector<Action> &list = schedule.ranks[r];
    const int32_t stage[2] = {static_cast<int32_t>(r), static_cast<int32_t>(2 * p - 1 - r)};
    int32_t forwards[2] = {0, 0}, backwards[2] = {0, 0};
    std::deque<Action> waiting;
    auto forward = [&](int c) { list.push_back({ActionKind::Forward, stage[c], forwards[c]++}); };
    auto oldestWeight = [&] {
      list.push_back(waiting.front());
      waiting.pop_front();
    };
    // A whole backward, or with `split` an input gradient whose W waits.
    auto backward = [&](int c, bool split) {
      Action a{ActionKind::Backward, stage[c], backwards[c]++};
      if (split && limit > 0) {
        if (static_cast<int64_t>(waiting.size()) >= limit)
          oldestWeight();
        a.kind = ActionKind::BackwardInput;
        waiting.push_back({ActionKind::BackwardWeight, a.stage, a.mb});
      }
      list.push_back(a);
    };
    auto pair = [&](int f, int b) {
      schedule.pairs[r].push_back(static_cast<int32_t>(list.size()));
      forward(f);
      backward(b, false);
    };
    for (int64_t i = 0; i < 2 * (p - r - 1); ++i)
      forward(0);
    for (int64_t i = 0; i <= r; ++i) {
      forward(0);
      forward(1);
    }
    for (int64_t i = 0; i < p - r - 1; ++i) {
      list.push_back({ActionKind::BackwardInput, stage[1], backwards[1]});
      list.push_back({ActionKind::BackwardWeight, stage[1], backwards[1]++});
      forward(1);
    }
    for (int64_t i = 0; i < m - 2 * p + r + 1; ++i) {
      if (i == 0 && r == p - 1) {
        forward(0);
        backward(1, false);
      } else {
        pair(0, 1);
      }
      pair(1, 0);
    }
    for (int64_t i = 0; i < p - r - 1; ++i) {
      backward(1, false);
      pair(1, 0);
    }
    const int64_t half = (r + 1) / 2;
    for (int64_t i = 0; i <= r; ++i) {
      backward(1, i > half || (i == half && r % 2 == 1));
      backward(0, i >= half);
    }
    for (int64_t i = 0; i < p - r - 1; ++i) {
      if (!waiting.empty())
        oldestWeight();
      backward(0, true);
    }
    while (!waiting.empty())
      oldestWeight();
  }
  return schedule;
}

/// Checks the V placement: 2P stages, rank r holding stages r and 2P-1-r.
std::optional<std::string> checkVPlacement(const ScheduleProblem &problem,
                                           const std::string &name) {
  const int64_t p = problem.numRanks();
  bool v = problem.numStages() == 2 * p;
  for (int64_t s = 0; v && s < problem.numStages(); ++s)
    v = problem.rankOfStage(s) == (s < p ? s : 2 * p - 1 - s);
  if (v)
    return std::nullopt;
  return name + " runs on the V placement (rank r holds stages r and 2P-1-r, so " +
         std::to_string(2 * p) + " stages on " + std::to_string(p) +
         " ranks); set stages_per_device to 2 and placement to \"v\"";
}

} // namespace

llvm::Expected<Schedule> conduit::sched::splitBackward(const ScheduleProblem &problem,
                                                       const Schedule &whole,
                                                       const ActionTimes &times,
                                                       std::optional<int64_t> deferLimit) {
  // Completeness here; an order that cannot run shows as actions the simulation never ran.
  if (Violation v = problem.check(); v || (v = verifyCompleteness(problem, whole)))
    return scheduleError("cannot split the backwards of an invalid schedule: " + *v);
  int64_t bound = 0;
  for (int64_t r = 0; r < problem.numRanks(); ++r)
    bound = std::max(bound, peakInFlight(whole, r));
  for (const std::vector<Action> &list : whole.ranks)
    for (const Action &a : list)
      if (a.kind != ActionKind::Forward && a.kind != ActionKind::Backward)
        return scheduleError("the backwards of " + describe(a) + "'s schedule are split already");

  const int64_t limit = deferLimit.value_or(problem.numRanks()); // every loop schedule's own
  ListBuilder b(problem, times);
  std::vector<size_t> next(problem.numRanks(), 0);
  b.drive([&](int64_t r, double now, bool) {
    const std::vector<Action> &list = whole.ranks[r];
    if (next[r] < list.size()) {
      const Action &a = list[next[r]];
      bool forward = a.kind == ActionKind::Forward;
      // Deferred Ws go first where another forward would hold more than the whole schedule's
      // fullest rank, or where another input gradient would defer more than the limit (by
      // default P: a pipeline's fill or drain lasts P-1 steps; deferring more only holds
      // memory).
      if ((forward ? b.held[r] >= bound || b.overLimit(r, limit, false)
                   : b.overLimit(r, limit, true)) &&
          b.runWeight(r, now))
        return true;
      if (forward ? b.forwardReady(a.stage, a.mb, now) : b.inputReady(a.stage, a.mb, now)) {
        ++next[r];
        b.run(r, {{forward ? ActionKind::Forward : ActionKind::BackwardInput, a.stage, a.mb}}, now);
        return true;
      }
    }
    return b.runWeight(r, now);
  });
  if (b.remaining > 0)
    return scheduleError("cannot split the backwards of an invalid schedule: " +
                         verifyExecutable(problem, whole).value_or("its order cannot run"));
  return std::move(b.schedule);
}

llvm::Expected<Schedule> conduit::sched::scheduleZeroBubbleH1(const ScheduleProblem &problem,
                                                              const ActionTimes &times,
                                                              std::optional<int64_t> deferLimit) {
  llvm::Expected<Schedule> whole = scheduleOneFOneB(problem);
  if (!whole)
    return llvm::createStringError("zb-h1 is 1F1B with split backwards: " +
                                   llvm::toString(whole.takeError()));
  return splitBackward(problem, *whole, times, deferLimit);
}

llvm::Expected<Schedule>
conduit::sched::scheduleInterleavedZeroBubble(const ScheduleProblem &problem, int64_t groupSize,
                                              const ActionTimes &times,
                                              std::optional<int64_t> deferLimit) {
  llvm::Expected<Schedule> whole = scheduleDepthFirst(problem, groupSize);
  if (!whole)
    return llvm::createStringError("interleaved-zb is depth-first with split backwards: " +
                                   llvm::toString(whole.takeError()));
  return splitBackward(problem, *whole, times, deferLimit);
}

llvm::Expected<Schedule> conduit::sched::scheduleZeroBubbleV(const ScheduleProblem &problem,
                                                             const ActionTimes &times,
                                                             std::optional<int64_t> deferLimit) {
  if (Violation v = problem.check())
    return scheduleError(*v);
  if (std::optional<std::string> v = checkVPlacement(problem, "zbv"))
    return scheduleError(*v);
  return scheduleOnV(
      problem, times, zeroBubbleVBound(problem.numRanks()), false,
      deferLimit.value_or(ownDeferLimit(runtime::Schedule::ZeroBubbleV, problem.numRanks())),
      Deferral::Throughout);
}

llvm::Expected<Schedule> conduit::sched::scheduleDualPipeV(const ScheduleProblem &problem,
                                                           const ActionTimes &times,
                                                           std::optional<int64_t> deferLimit,
                                                           Deferral deferral) {
  if (Violation v = problem.check())
    return scheduleError(*v);
  if (std::optional<std::string> v = checkVPlacement(problem, "dualpipev"))
    return scheduleError(*v);
  const int64_t limit =
      deferLimit.value_or(ownDeferLimit(runtime::Schedule::DualPipeV, problem.numRanks()));
  if (deferral == Deferral::Cooldown)
    if (std::optional<Schedule> own = dualPipeOrder(problem, limit))
      return std::move(*own);
  return scheduleOnV(problem, times, dualPipeVBound(problem.numRanks()), true, limit, deferral);
}

std::optional<std::string> conduit::sched::withoutDualPipeOrder(const ScheduleProblem &problem) {
  if (!problem.equalPartitions())
    return std::string("dualpipev runs DualPipe's own order only where every stage cuts the "
                       "batch alike; with parallelism.microbatch_partitions it runs the list "
                       "rule instead");
  const int64_t twice = 2 * problem.numRanks(), m = problem.numMicrobatches(0);
  if (m < twice)
    return "dualpipev runs DualPipe's own order only with at least 2P = " + std::to_string(twice) +
           " micro-batches; with " + std::to_string(m) +
           " it runs the list rule instead (parallelism.microbatches)";
  return std::nullopt;
}

int64_t conduit::sched::zeroBubbleVBound(int64_t ranks) { return 2 * ranks; }
int64_t conduit::sched::dualPipeVBound(int64_t ranks) { return 2 * ranks + 2; }

int64_t conduit::sched::ownDeferLimit(runtime::Schedule schedule, int64_t ranks) {
  // ZB-V holds at most zeroBubbleVBound pairs, its deferred Ws among them, so this limit
  // never binds there.
  return schedule == runtime::Schedule::ZeroBubbleV ? zeroBubbleVBound(ranks) : ranks;
}
